#!/usr/bin/env node
// tests/e2e/servers/auth_proxy.mjs: a header-adding HTTP proxy for clients
// that cannot send the sandbox's bearer token (the MCP conformance suite's
// client sends none). It runs inside the sandbox, listens on loopback and
// forwards every request to one bridge URL with `Authorization: Bearer`
// added, streaming both ways (event streams included). The token is read
// from a file so it never shows in a process list. No npm packages.
//
//   node auth_proxy.mjs PORT TARGET_URL TOKEN_FILE
//
// Prints "listening PORT" once it accepts connections.
import fs from 'node:fs';
import http from 'node:http';

const [port, target, tokenFile] = process.argv.slice(2);
if (!port || !target || !tokenFile) {
	process.stderr.write('usage: auth_proxy.mjs PORT TARGET_URL TOKEN_FILE\n');
	process.exit(2);
}
const token = fs.readFileSync(tokenFile, 'utf8').trim();
const up = new URL(target);
// Hop-by-hop headers and the ones this proxy sets itself.
const DROP = new Set(['host', 'connection', 'keep-alive', 'authorization',
	'proxy-connection', 'transfer-encoding', 'upgrade']);

const server = http.createServer((req, res) => {
	const headers = {};
	for (const [k, v] of Object.entries(req.headers))
		if (!DROP.has(k))
			headers[k] = v;
	headers.authorization = `Bearer ${token}`;
	const out = http.request({
		host: up.hostname, port: up.port || 80, method: req.method,
		path: up.pathname + up.search, headers,
	}, (ures) => {
		res.writeHead(ures.statusCode, ures.headers);
		ures.pipe(res);
	});
	out.on('error', (e) => {
		if (!res.headersSent)
			res.writeHead(502, { 'content-type': 'text/plain' });
		res.end(`proxy: ${e.message}\n`);
	});
	// A client that goes away ends the forwarded request too (the bridge
	// sees the stream close, as it would without the proxy).
	res.on('close', () => out.destroy());
	req.pipe(out);
});
server.listen(Number(port), '127.0.0.1', () => {
	process.stdout.write(`listening ${server.address().port}\n`);
});
