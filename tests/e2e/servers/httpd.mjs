#!/usr/bin/env node
// tests/e2e/servers/httpd.mjs: the fake hosts of the end-to-end world.
//
// The world (tests/e2e/world.sh) runs one instance per role inside its "inet"
// namespace. Scenarios need servers that say who they are, that record every
// request so a test can assert "the attacker received nothing" (or did), and
// that cannot be steered to read outside their file tree. Node's standard
// library is enough; no package from node_modules is used here.
//
//   node httpd.mjs --name NAME --role static|metadata|attacker
//        --listen ADDR:PORT ... [--tcp ADDR:PORT ...] [--udp ADDR:PORT ...]
//        [--root DIR] --log FILE --ready FILE [--tag TAG]
//
// Every HTTP answer carries "X-World-Host: NAME". Every request (HTTP, raw TCP
// connection, UDP datagram) is appended to --log as one JSON line, written
// synchronously before the answer is sent, so a client that got its answer
// can read its own line. --ready is written once every socket is bound.
// --tag is ignored; it puts the run tag on the command line for teardown
// checks.

import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import net from 'node:net';
import dgram from 'node:dgram';

const MAX_BODY = 1 << 20;		// logged request bodies are capped
const MAX_BYTES = 64 << 20;		// /bytes/N cap
const MAX_LINE = 64 << 10;		// raw TCP: bytes of a connection logged

function usage(msg) {
	process.stderr.write(`httpd.mjs: ${msg}\n`);
	process.exit(2);
}

const opt = { listen: [], tcp: [], udp: [], role: 'static' };
{
	const a = process.argv.slice(2);
	for (let i = 0; i < a.length; i++) {
		const k = a[i], v = a[i + 1];
		if (v === undefined)
			usage(`missing value for ${k}`);
		switch (k) {
		case '--name': opt.name = v; break;
		case '--role': opt.role = v; break;
		case '--root': opt.root = path.resolve(v); break;
		case '--log': opt.log = v; break;
		case '--ready': opt.ready = v; break;
		case '--tag': break;
		case '--listen': opt.listen.push(v); break;
		case '--tcp': opt.tcp.push(v); break;
		case '--udp': opt.udp.push(v); break;
		default: usage(`unknown option ${k}`);
		}
		i++;
	}
	if (!opt.name || !opt.log || !opt.ready)
		usage('--name, --log and --ready are required');
	if (!['static', 'metadata', 'attacker'].includes(opt.role))
		usage(`unknown role ${opt.role}`);
}

// "ADDR:PORT" or "[V6]:PORT".
function splitHostPort(s) {
	const m = /^\[([^\]]+)\]:(\d+)$/.exec(s) || /^([^:]+):(\d+)$/.exec(s);
	if (!m)
		usage(`bad address ${s}`);
	return { host: m[1], port: Number(m[2]) };
}

const logfd = fs.openSync(opt.log, 'a');
function record(obj) {
	obj.server = opt.name;
	fs.writeSync(logfd, JSON.stringify(obj) + '\n');
}

function clean(addr) {
	// Node reports v4 clients of a v6 socket as ::ffff:a.b.c.d.
	return addr && addr.startsWith('::ffff:') ? addr.slice(7) : addr;
}

// ------------------------------------------------------------ roles

const CREDS = {
	Code: 'Success',
	LastUpdated: '2026-01-01T00:00:00Z',
	Type: 'AWS-HMAC',
	AccessKeyId: 'AKIAFAKEFAKEFAKE0000',
	SecretAccessKey: 'fakeSECRETfakeSECRETfakeSECRETfake0000',
	Token: 'FAKETOKEN-sluice-world-not-a-real-credential',
	Expiration: '2036-01-01T00:00:00Z',
};

function metadata(req, res, url) {
	const p = url.pathname;
	const send = (code, type, body) => {
		res.writeHead(code, { 'Content-Type': type });
		res.end(body);
	};
	if (req.method === 'PUT' && p === '/latest/api/token')
		return send(200, 'text/plain', 'FAKE-IMDSV2-TOKEN');
	if (p === '/latest/meta-data/' || p === '/latest/meta-data')
		return send(200, 'text/plain', 'ami-id\nhostname\niam/\ninstance-id\n');
	if (p === '/latest/meta-data/instance-id')
		return send(200, 'text/plain', 'i-0fakefakefake0000');
	if (p === '/latest/meta-data/hostname')
		return send(200, 'text/plain', 'ip-192-0-2-99.example.internal');
	if (p === '/latest/meta-data/iam/security-credentials/' ||
	    p === '/latest/meta-data/iam/security-credentials')
		return send(200, 'text/plain', 'demo');
	if (p === '/latest/meta-data/iam/security-credentials/demo')
		return send(200, 'application/json', JSON.stringify(CREDS, null, 2));
	// GCP and Azure answer only with their header, as the real ones do.
	if (p.startsWith('/computeMetadata/v1/')) {
		if (req.headers['metadata-flavor'] !== 'Google')
			return send(403, 'text/plain', 'Missing Metadata-Flavor:Google header\n');
		return send(200, 'application/json', JSON.stringify({
		    access_token: 'ya29.FAKE-sluice-world', expires_in: 3599,
		    token_type: 'Bearer' }));
	}
	if (p.startsWith('/metadata/instance')) {
		if (req.headers.metadata !== 'true')
			return send(400, 'application/json', '{"error":"Bad request"}');
		return send(200, 'application/json', '{"compute":{"vmId":"fake-0000"}}');
	}
	return send(404, 'text/plain', 'not found\n');
}

function staticFile(req, res, url) {
	if (req.method !== 'GET' && req.method !== 'HEAD') {
		res.writeHead(405, { 'Content-Type': 'text/plain' });
		return res.end('method not allowed\n');
	}
	if (!opt.root) {
		res.writeHead(200, { 'Content-Type': 'text/plain' });
		return res.end(`hello from ${opt.name}\n`);
	}
	let rel;
	try {
		rel = decodeURIComponent(url.pathname);
	} catch {
		res.writeHead(400);
		return res.end();
	}
	// Resolve and require the result to stay under root: no "..", no
	// symlink games (the tree is ours, but the request is hostile).
	let file = path.resolve(opt.root, '.' + path.posix.normalize('/' + rel));
	if (file !== opt.root && !file.startsWith(opt.root + path.sep)) {
		res.writeHead(403);
		return res.end();
	}
	try {
		let st = fs.statSync(file);
		if (st.isDirectory()) {
			file = path.join(file, 'index.html');
			st = fs.statSync(file);
		}
		if (!st.isFile())
			throw new Error('not a file');
		const type = file.endsWith('.html') ? 'text/html' :
		    file.endsWith('.gz') ? 'application/gzip' :
		    file.endsWith('.json') ? 'application/json' : 'text/plain';
		res.writeHead(200, { 'Content-Type': type,
		    'Content-Length': st.size });
		if (req.method === 'HEAD')
			return res.end();
		fs.createReadStream(file).pipe(res);
	} catch {
		res.writeHead(404, { 'Content-Type': 'text/plain' });
		res.end('not found\n');
	}
}

function handle(req, res, body, local) {
	const url = new URL(req.url, 'http://x');
	const ent = {
		proto: 'http', src: clean(req.socket.remoteAddress),
		sport: req.socket.remotePort, dst: local.host, dport: local.port,
		method: req.method, path: req.url, headers: req.headers,
		body: body.toString('utf8'),
	};
	record(ent);
	res.setHeader('X-World-Host', opt.name);
	res.setHeader('Connection', 'close');
	// Helpers every role has: who am I talking to, a sized body, a status.
	if (url.pathname === '/ip') {
		res.writeHead(200, { 'Content-Type': 'text/plain' });
		return res.end(ent.src + '\n');
	}
	let m = /^\/bytes\/(\d{1,9})$/.exec(url.pathname);
	if (m && opt.role !== 'metadata') {
		const n = Math.min(Number(m[1]), MAX_BYTES);
		res.writeHead(200, { 'Content-Type': 'application/octet-stream',
		    'Content-Length': n });
		const chunk = Buffer.alloc(65536, 0x61);
		let left = n;
		const pump = () => {
			while (left > 0) {
				const c = Math.min(left, chunk.length);
				left -= c;
				if (!res.write(chunk.subarray(0, c)))
					return res.once('drain', pump);
			}
			res.end();
		};
		return pump();
	}
	m = /^\/status\/(\d{3})$/.exec(url.pathname);
	if (m) {
		res.writeHead(Number(m[1]), { 'Content-Type': 'text/plain' });
		return res.end(`status ${m[1]}\n`);
	}
	if (opt.role === 'metadata')
		return metadata(req, res, url);
	if (opt.role === 'attacker') {
		res.writeHead(200, { 'Content-Type': 'text/plain' });
		return res.end('received\n');
	}
	return staticFile(req, res, url);
}

// ---------------------------------------------------------- sockets

let pending = opt.listen.length + opt.tcp.length + opt.udp.length;
function bound() {
	if (--pending === 0)
		fs.writeFileSync(opt.ready, `${process.pid}\n`);
}
if (pending === 0)
	usage('nothing to listen on');

function fail(what, e) {
	process.stderr.write(`httpd.mjs ${opt.name}: ${what}: ${e.message}\n`);
	process.exit(1);
}

for (const l of opt.listen) {
	const local = splitHostPort(l);
	const srv = http.createServer((req, res) => {
		const chunks = [];
		let size = 0;
		req.on('data', (c) => {
			if (size < MAX_BODY)
				chunks.push(c.subarray(0, MAX_BODY - size));
			size += c.length;
		});
		req.on('end', () => handle(req, res, Buffer.concat(chunks), local));
		req.on('error', () => res.destroy());
	});
	srv.headersTimeout = 10000;
	srv.requestTimeout = 20000;
	srv.on('error', (e) => fail(`listen ${l}`, e));
	srv.listen({ host: local.host, port: local.port }, bound);
}

for (const l of opt.tcp) {
	const local = splitHostPort(l);
	const srv = net.createServer((sock) => {
		const src = clean(sock.remoteAddress), sport = sock.remotePort;
		const chunks = [];
		let size = 0, done = false;
		const finish = () => {
			if (done)
				return;
			done = true;
			record({ proto: 'tcp', src, sport, dst: local.host,
			    dport: local.port,
			    data: Buffer.concat(chunks).toString('utf8') });
			sock.destroy();
		};
		// The connection itself is logged at once, data as it ends.
		record({ proto: 'tcp-open', src, sport, dst: local.host,
		    dport: local.port });
		sock.setTimeout(5000, finish);
		sock.on('data', (c) => {
			if (size < MAX_LINE)
				chunks.push(c.subarray(0, MAX_LINE - size));
			size += c.length;
			if (size >= MAX_LINE)
				finish();
		});
		sock.on('end', finish);
		sock.on('error', finish);
	});
	srv.on('error', (e) => fail(`tcp ${l}`, e));
	srv.listen({ host: local.host, port: local.port }, bound);
}

for (const l of opt.udp) {
	const local = splitHostPort(l);
	const s = dgram.createSocket(net.isIPv6(local.host) ? 'udp6' : 'udp4');
	s.on('message', (msg, rinfo) => {
		record({ proto: 'udp', src: clean(rinfo.address),
		    sport: rinfo.port, dst: local.host, dport: local.port,
		    data: msg.subarray(0, 2048).toString('utf8') });
	});
	s.on('error', (e) => fail(`udp ${l}`, e));
	s.bind({ address: local.host, port: local.port }, bound);
}

process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
