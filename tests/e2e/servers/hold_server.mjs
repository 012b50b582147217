#!/usr/bin/env node
// tests/e2e/servers/hold_server.mjs: a tiny MCP server over stdio that holds
// tool calls, for the scenario that kills sluiced while calls are in flight
// (t_bridge_intent.sh): it must be able to prove which calls reached the
// upstream, and keep them unanswered for as long as the scenario wants. No
// npm packages: one JSON-RPC message per line (stdio_rpc.mjs).
//
//   node hold_server.mjs FLAGDIR
//
// Tools: `quick` answers at once; `hold` answers only once FLAGDIR/release
// exists. Every tools/call is appended to FLAGDIR/calls.log as one JSON
// line {"tool", "k"} (k: the call's argument) before anything else is done
// with it, so a call the log names is one this upstream received.
import fs from 'node:fs';

import { send, serveStdio } from './stdio_rpc.mjs';

const dir = process.argv[2];
if (!dir) {
	process.stderr.write('usage: hold_server.mjs FLAGDIR\n');
	process.exit(2);
}

const schema = { type: 'object', properties: { k: { type: 'string' } } };
const tools = [
	{ name: 'quick', description: 'Answers at once.', inputSchema: schema },
	{ name: 'hold', description: 'Answers once released.',
	  inputSchema: schema },
];
const held = [];

function answer(m, name, k) {
	send({ jsonrpc: '2.0', id: m.id, result: {
	    content: [{ type: 'text', text: `${name} ${k} done` }] } });
}

// Polled by the server itself (not by the test): a held call is answered
// once the scenario says so.
setInterval(() => {
	if (held.length === 0 || !fs.existsSync(dir + '/release'))
		return;
	while (held.length > 0) {
		const h = held.shift();
		answer(h.m, 'hold', h.k);
	}
}, 50).unref();

function handle(m) {
	if (m.method === 'initialize')
		return send({ jsonrpc: '2.0', id: m.id, result: {
		    protocolVersion: m.params.protocolVersion,
		    capabilities: { tools: { listChanged: false } },
		    serverInfo: { name: 'hold', version: '1' } } });
	if (m.id === undefined || m.method === undefined)
		return;		// notifications and responses
	if (m.method === 'ping')
		return send({ jsonrpc: '2.0', id: m.id, result: {} });
	if (m.method === 'tools/list')
		return send({ jsonrpc: '2.0', id: m.id, result: { tools } });
	if (m.method === 'tools/call') {
		const name = String(m.params && m.params.name);
		const k = String(m.params && m.params.arguments &&
		    m.params.arguments.k);
		fs.appendFileSync(dir + '/calls.log',
		    JSON.stringify({ tool: name, k }) + '\n');
		if (name === 'hold')
			return held.push({ m, k });
		return answer(m, name, k);
	}
	send({ jsonrpc: '2.0', id: m.id,
	    error: { code: -32601, message: 'method not found' } });
}

serveStdio(handle);
