#!/usr/bin/env node
// tests/e2e/servers/sreq_server.mjs: an MCP server over stdio that asks the
// client things, for t_bridge_srvreq.sh. Written without the SDK so that
// each request it makes of the client, and what it does with the answer,
// is exactly what the scenario needs. One JSON-RPC message per line.
//
//   node sreq_server.mjs [FLAGDIR]
//
// The tool `ask` takes {kind: "sampling" | "elicitation" | "roots" |
// "other"} and, while the call is in flight, sends the client the request
// of that kind (`other` is a method no client serves); the tool's result
// text is the JSON of the answer it got ({"error":{...}} or {"result":
// ...}). The sampling request carries a marker text the scenario looks for
// in the record of what was asked. Kind `hang` never answers: it appends
// "call ID" (its request id) to FLAGDIR/calls.log, and "cancelled ID" when
// notifications/cancelled names a request; when it names one of the
// requests it made of the client, the call it came in is answered
// {"cancelled":ID}. Kind `withdraw` sends the
// sampling request, and once FLAGDIR/withdraw exists cancels it
// (notifications/cancelled) and answers the call {"withdrawn":ID}.
// Kind `twice` sends two sampling requests in one write (so that both are
// in the bridge before any answer can be) and answers the call, once
// both are answered, with the JSON array of the two answers.
// Roots, as servers that use them do: offered roots at initialize, it
// asks roots/list once initialized and again at each notifications/roots/
// list_changed, outside any call. FLAGDIR/roots.log gets "offered CAPS"
// (the client's capabilities), "changed" for each change notification,
// and "roots ANSWER" for each answer ({"error":...} or {"result":...}).
import fs from 'node:fs';
import readline from 'node:readline';

const dir = process.argv[2];
function log(line) {
	if (dir)
		fs.appendFileSync(dir + '/calls.log', line + '\n');
}

function send(o) { process.stdout.write(JSON.stringify(o) + '\n'); }

const asks = {
	sampling: { method: 'sampling/createMessage', params: {
	    messages: [{ role: 'user', content: { type: 'text',
		text: 'marker-sampling-please' } }], maxTokens: 16 } },
	elicitation: { method: 'elicitation/create', params: {
	    message: 'marker-elicitation-please', requestedSchema: {
		type: 'object', properties: { answer: { type: 'string' } } } } },
	roots: { method: 'roots/list', params: {} },
	other: { method: 'x-unknown/thing', params: {} },
};
// Our requests in flight: id -> the tools/call id to answer.
const pending = new Map();
let caps = {}, nroots = 0;
function rlog(line) {
	if (dir)
		fs.appendFileSync(dir + '/roots.log', line + '\n');
}
function askRoots() {
	send({ jsonrpc: '2.0', id: 'roots-' + ++nroots, method: 'roots/list',
	    params: {} });
}
// The pairs of `twice`: id -> {call, ids, got}, shared by both ids.
const pairs = new Map();
let next = 1;

const tools = [{ name: 'ask', description: 'Asks the client something.',
    inputSchema: { type: 'object', properties: { kind: { type: 'string' } },
	required: ['kind'] } }];

readline.createInterface({ input: process.stdin }).on('line', (line) => {
	let m;
	try {
		m = JSON.parse(line);
	} catch {
		return;
	}
	if (m.method === undefined && m.id !== undefined) {
		// An answer to one of our requests.
		if (typeof m.id === 'string' && m.id.startsWith('roots-')) {
			rlog('roots ' + JSON.stringify(m.error !== undefined ?
			    { error: m.error } : { result: m.result }));
			return;
		}
		const pair = pairs.get(m.id);
		if (pair !== undefined) {
			pairs.delete(m.id);
			pair.got[pair.ids.indexOf(m.id)] = m.error !== undefined ?
			    { error: m.error } : { result: m.result };
			if (pair.got.every((g) => g !== null))
				send({ jsonrpc: '2.0', id: pair.call, result: {
				    content: [{ type: 'text', text:
				    JSON.stringify(pair.got) }] } });
			return;
		}
		const call = pending.get(m.id);
		if (call === undefined)
			return;
		pending.delete(m.id);
		const text = JSON.stringify(m.error !== undefined ?
		    { error: m.error } : { result: m.result });
		send({ jsonrpc: '2.0', id: call, result: {
		    content: [{ type: 'text', text }] } });
		return;
	}
	if (m.id === undefined) {
		if (m.method === 'notifications/initialized' &&
		    caps.roots !== undefined)
			askRoots();
		if (m.method === 'notifications/roots/list_changed') {
			rlog('changed');
			askRoots();
		}
		if (m.method !== 'notifications/cancelled')
			return;
		log(`cancelled ${JSON.stringify(m.params.requestId)}`);
		// One of ours the client gave up: the call says so.
		const call = pending.get(m.params.requestId);
		if (call !== undefined) {
			pending.delete(m.params.requestId);
			send({ jsonrpc: '2.0', id: call, result: { content: [{
			    type: 'text', text: JSON.stringify({ cancelled:
			    m.params.requestId }) }] } });
		}
		return;
	}
	switch (m.method) {
	case 'initialize':
		caps = (m.params || {}).capabilities || {};
		rlog('offered ' + JSON.stringify(caps));
		send({ jsonrpc: '2.0', id: m.id, result: {
		    protocolVersion: m.params.protocolVersion,
		    capabilities: { tools: {} },
		    serverInfo: { name: 'sreq', version: '1.0.0' } } });
		break;
	case 'tools/list':
		send({ jsonrpc: '2.0', id: m.id, result: { tools } });
		break;
	case 'tools/call': {
		if ((m.params.arguments || {}).kind === 'hang') {
			log(`call ${JSON.stringify(m.id)}`);
			break;
		}
		if ((m.params.arguments || {}).kind === 'twice') {
			const pair = { call: m.id, ids: ['sreq-' + next++,
			    'sreq-' + next++], got: [null, null] };
			let out = '';
			for (const id of pair.ids) {
				pairs.set(id, pair);
				out += JSON.stringify({ jsonrpc: '2.0', id, method:
				    asks.sampling.method, params:
				    asks.sampling.params }) + '\n';
			}
			process.stdout.write(out);
			break;
		}
		if ((m.params.arguments || {}).kind === 'withdraw') {
			const id = 'sreq-' + next++;
			send({ jsonrpc: '2.0', id, method: asks.sampling.method,
			    params: asks.sampling.params });
			const t = setInterval(() => {
				if (!fs.existsSync(dir + '/withdraw'))
					return;
				clearInterval(t);
				send({ jsonrpc: '2.0', method:
				    'notifications/cancelled', params: {
				    requestId: id, reason: 'marker-withdrawn' } });
				send({ jsonrpc: '2.0', id: m.id, result: {
				    content: [{ type: 'text', text:
				    JSON.stringify({ withdrawn: id }) }] } });
			}, 50);
			break;
		}
		const a = asks[(m.params.arguments || {}).kind];
		if (m.params.name !== 'ask' || a === undefined) {
			send({ jsonrpc: '2.0', id: m.id, error: { code: -32602,
			    message: 'unknown tool or kind' } });
			break;
		}
		const id = 'sreq-' + next++;
		pending.set(id, m.id);
		send({ jsonrpc: '2.0', id, method: a.method, params: a.params });
		break;
	}
	case 'ping':
		send({ jsonrpc: '2.0', id: m.id, result: {} });
		break;
	default:
		send({ jsonrpc: '2.0', id: m.id, error: { code: -32601,
		    message: 'Method not found' } });
	}
});
