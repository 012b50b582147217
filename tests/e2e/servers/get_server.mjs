#!/usr/bin/env node
// tests/e2e/servers/get_server.mjs: a Streamable HTTP MCP server whose GET
// stream does exactly what a scenario needs (t_bridge_roots.sh). Written
// without the SDK: what matters is the answer to GET.
//
//   node get_server.mjs --listen ADDR:PORT --mode 405|drop --log FILE
//
// POST: initialize (answered with an Mcp-Session-Id), notifications (202),
// ping, tools/list (one tool, `hello`) and tools/call hello (text
// "hello from MODE"), each as one JSON answer. GET: --mode 405 answers 405
// (it offers no stream); --mode drop answers an event stream that carries
// one event, id "ev-N" (N counts the GETs), data a notifications/message,
// and then ends it, as a server that drops its streams does. Each request
// appends one JSON line to --log: {"method","session","last_event_id",
// "sent" (the id of the event a GET got), "rpc" (a POST's JSON-RPC
// method)}.
import fs from 'node:fs';
import http from 'node:http';

const opt = {};
for (let i = 2; i < process.argv.length; i += 2)
	opt[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
if (!opt.listen || !opt.mode || !opt.log) {
	process.stderr.write('get_server.mjs: --listen, --mode and --log\n');
	process.exit(2);
}
const [host, port] = [opt.listen.replace(/:[0-9]+$/, ''),
    Number(opt.listen.replace(/^.*:/, ''))];
const SID = 'get-session-' + process.pid;
let gets = 0;

function log(o) { fs.appendFileSync(opt.log, JSON.stringify(o) + '\n'); }

function answer(res, id, result) {
	const body = JSON.stringify({ jsonrpc: '2.0', id, result });
	res.writeHead(200, { 'Content-Type': 'application/json',
	    'Mcp-Session-Id': SID });
	res.end(body);
}

const server = http.createServer((req, res) => {
	const sid = req.headers['mcp-session-id'] || null;
	if (req.method === 'GET') {
		if (opt.mode === '405') {
			log({ method: 'GET', session: sid, last_event_id:
			    req.headers['last-event-id'] || null });
			res.writeHead(405, { Allow: 'POST' });
			res.end();
			return;
		}
		gets++;
		log({ method: 'GET', session: sid, last_event_id:
		    req.headers['last-event-id'] || null, sent: `ev-${gets}` });
		res.writeHead(200, { 'Content-Type': 'text/event-stream',
		    'Cache-Control': 'no-cache' });
		res.write(`id: ev-${gets}\ndata: ` + JSON.stringify({
		    jsonrpc: '2.0', method: 'notifications/message',
		    params: { level: 'info', data: `get ${gets}` } }) + '\n\n');
		setTimeout(() => res.end(), 100);
		return;
	}
	if (req.method !== 'POST') {
		res.writeHead(405);
		res.end();
		return;
	}
	let body = '';
	req.on('data', (c) => { body += c; if (body.length > 1 << 20) req.destroy(); });
	req.on('end', () => {
		let m;
		try {
			m = JSON.parse(body);
		} catch {
			res.writeHead(400);
			res.end();
			return;
		}
		log({ method: 'POST', session: sid, rpc: m.method || null });
		if (m.id === undefined) {
			res.writeHead(202);
			res.end();
			return;
		}
		switch (m.method) {
		case 'initialize':
			answer(res, m.id, { protocolVersion: '2025-06-18',
			    capabilities: { tools: {} },
			    serverInfo: { name: 'get-server', version: '1' } });
			break;
		case 'tools/list':
			answer(res, m.id, { tools: [{ name: 'hello',
			    description: 'says hello',
			    inputSchema: { type: 'object', properties: {} } }] });
			break;
		case 'tools/call':
			answer(res, m.id, { content: [{ type: 'text',
			    text: `hello from ${opt.mode}` }] });
			break;
		case 'ping':
			answer(res, m.id, {});
			break;
		default:
			res.writeHead(200, { 'Content-Type': 'application/json' });
			res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id,
			    error: { code: -32601, message: 'Method not found' } }));
		}
	});
});
server.listen(port, host);
