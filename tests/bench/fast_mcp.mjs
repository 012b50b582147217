#!/usr/bin/env node
// tests/bench/fast_mcp.mjs: the fast upstream of the bench's concurrency
// rows. A throughput measurement of the bridge needs an upstream whose own
// cost is as small as it can be, so that what is measured is the path
// between client and server: this one answers from memory, holds no
// per-call state beyond its sessions, and speaks MCP Streamable HTTP
// (2025-06-18 and 2025-11-25: initialize with Mcp-Session-Id,
// notifications, ping, tools/list, tools/call of `echo`, JSON answers) or,
// for proxies that take a stdio server, MCP over stdio. Node's standard
// library only: the SDK's server costs more per call than the paths it is
// meant to compare.
//
//   node fast_mcp.mjs --http ADDR:PORT | --stdio
import http from 'node:http';
import crypto from 'node:crypto';

import { send, serveStdio } from '../e2e/servers/stdio_rpc.mjs';

const VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'];
const TOOLS = [{ name: 'echo', description: 'Echoes its message.',
    inputSchema: { type: 'object', properties: {
	message: { type: 'string' } }, required: ['message'] } }];

// The answer to one JSON-RPC message, or null for a notification.
function answer(m) {
	if (m === null || typeof m !== 'object' || m.jsonrpc !== '2.0')
		return { jsonrpc: '2.0', id: null,
		    error: { code: -32600, message: 'Invalid Request' } };
	if (m.id === undefined)
		return null;
	switch (m.method) {
	case 'initialize': {
		const v = m.params && m.params.protocolVersion;
		return { jsonrpc: '2.0', id: m.id, result: {
		    protocolVersion: VERSIONS.includes(v) ? v : VERSIONS[0],
		    capabilities: { tools: { listChanged: false } },
		    serverInfo: { name: 'fast', version: '1' } } };
	}
	case 'ping':
		return { jsonrpc: '2.0', id: m.id, result: {} };
	case 'tools/list':
		return { jsonrpc: '2.0', id: m.id, result: { tools: TOOLS } };
	case 'tools/call': {
		const p = m.params || {};
		if (p.name !== 'echo')
			return { jsonrpc: '2.0', id: m.id, error: {
			    code: -32602, message: `Unknown tool ${p.name}` } };
		const msg = String(p.arguments && p.arguments.message);
		return { jsonrpc: '2.0', id: m.id, result: { content: [
		    { type: 'text', text: `Echo: ${msg}` }] } };
	}
	default:
		return { jsonrpc: '2.0', id: m.id,
		    error: { code: -32601, message: 'Method not found' } };
	}
}

function serveHttp(spec) {
	const m = /^(.*):(\d+)$/.exec(spec);
	if (!m) {
		process.stderr.write('fast_mcp.mjs: --http ADDR:PORT\n');
		process.exit(2);
	}
	const sessions = new Set();
	const srv = http.createServer((req, res) => {
		if (req.method === 'DELETE') {
			sessions.delete(req.headers['mcp-session-id']);
			res.writeHead(200).end();
			return;
		}
		if (req.method !== 'POST') {
			res.writeHead(405, { Allow: 'POST, DELETE' }).end();
			return;
		}
		const chunks = [];
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			let msg;
			try {
				msg = JSON.parse(Buffer.concat(chunks).toString());
			} catch {
				res.writeHead(400, { 'Content-Type':
				    'application/json' }).end(JSON.stringify({
				    jsonrpc: '2.0', id: null, error: { code: -32700,
				    message: 'Parse error' } }));
				return;
			}
			const sid = req.headers['mcp-session-id'];
			const hdr = { 'Content-Type': 'application/json' };
			if (msg && msg.method === 'initialize') {
				const id = crypto.randomUUID();
				sessions.add(id);
				hdr['Mcp-Session-Id'] = id;
			} else if (!sessions.has(sid)) {
				res.writeHead(404, hdr).end(JSON.stringify({
				    jsonrpc: '2.0', id: null, error: { code: -32001,
				    message: 'Session not found' } }));
				return;
			}
			const a = answer(msg);
			if (a === null) {
				res.writeHead(202).end();
				return;
			}
			res.writeHead(200, hdr).end(JSON.stringify(a));
		});
	});
	srv.keepAliveTimeout = 60000;
	srv.listen(Number(m[2]), m[1]);
}

const a = process.argv.slice(2);
if (a[0] === '--http' && a[1])
	serveHttp(a[1]);
else if (a[0] === '--stdio')
	serveStdio((m) => {
		const r = answer(m);
		if (r !== null)
			send(r);
	});
else {
	process.stderr.write('usage: fast_mcp.mjs --http ADDR:PORT | --stdio\n');
	process.exit(2);
}
