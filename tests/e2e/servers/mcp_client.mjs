#!/usr/bin/env node
// tests/e2e/servers/mcp_client.mjs: a real MCP client for the scenarios.
//
// The bridge must work with the official TypeScript SDK, not with a client
// we wrote to agree with it; this wraps the SDK's Client in a command line
// so a shell scenario can connect (Streamable HTTP or stdio), list tools,
// call one, and assert on JSON. Needs `npm ci` in tests/e2e.
//
//   node mcp_client.mjs (--url URL [--header 'K: V']... | --stdio CMD ARG...)
//        [--timeout MS] (--list | --call TOOL [ARGS_JSON] | --resources |
//        --templates | --read URI | --prompts | --prompt NAME [ARGS_JSON] |
//        --subscribe URI | --unsubscribe URI | --ping | --await METHOD |
//        --listen METHOD | --notes | --served | --cancel TOOL ARGS_JSON FILE |
//        --roots-changed [METHOD] | --await-served METHOD |
//        --await-file FILE)... [--serve-requests] [--ready FILE]
//        [--end-session]
//
// Operations run in order over one session (so several cost one Node start
// and one initialize). Each prints one JSON line on stdout: --list gives
// {"tools":[...]} (the full definitions), --call gives the tool result as
// the SDK returns it (content, structuredContent, isError). --resources,
// --templates and --prompts list every page ({"resources":[...],"pages":N});
// --read, --prompt, --subscribe and --unsubscribe print the result, or
// {"error":{"code","message"}} when the server refused (and go on).
// --await METHOD pings until a notification of METHOD has arrived (bounded
// by --timeout); --listen METHOD sends nothing and waits for one, which can
// then only have come on the GET stream the SDK opens after initialize
// ({"seen","posts":POSTs sent while waiting,"gets":GETs opened so far});
// --notes prints {"notes":[...]}, every notification so far.
// --serve-requests offers sampling, elicitation and roots and answers each
// such request of the server (a fixed text, a fixed form answer, one root);
// --served prints {"served":[...]}, the method of each one answered so far.
// --cancel calls TOOL and, once FILE exists (polled, bounded by --timeout),
// cancels the call (the SDK sends notifications/cancelled): prints
// {"cancelled":true}, or the result if it came first; it closes only once
// FILE.done exists.
// --roots-changed sends notifications/roots/list_changed and, with
// METHOD (the request the server then makes, e.g. roots/list), waits for
// it to be served, sending the change again (at most 50 times, 200 ms
// apart) while it is not: the GET stream it needs opens on its own
// after initialize. Prints {"served":[...],"sent":N}.
// --await-served METHOD sends nothing and waits (bounded by --timeout)
// until a server request of METHOD was served, which can then only have
// come on the GET stream: prints {"served":[...]}. --ready FILE creates
// FILE once a GET stream of the server answered 200 (the stream is open).
// --await-file FILE sends nothing and waits (bounded by --timeout) until
// FILE exists: prints {"file":FILE}. --end-session ends the session
// (DELETE) before the client closes, so that the server forgets it and
// its GET stream at once.
// --stdio takes
// the rest of the command line, so it comes last. Exit status: 0 when every
// operation completed (a result with isError:true still exits 0: the
// scenario judges it), 1 on a protocol, transport or timeout error (message
// on stderr; the lines of earlier operations are already printed), 2 on
// usage errors.

import fs from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from
    '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema, ElicitRequestSchema,
    ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

function usage(msg) {
	process.stderr.write(`mcp_client.mjs: ${msg}\n`);
	process.exit(2);
}

const opt = { headers: {}, timeout: 20000, ops: [] };
{
	const a = process.argv.slice(2);
	for (let i = 0; i < a.length; i++) {
		switch (a[i]) {
		case '--url': opt.url = a[++i]; break;
		case '--header': {
			const h = a[++i] || '';
			const c = h.indexOf(':');
			if (c <= 0)
				usage(`bad header ${h}`);
			opt.headers[h.slice(0, c).trim()] = h.slice(c + 1).trim();
			break;
		}
		case '--timeout': opt.timeout = Number(a[++i]); break;
		case '--serve-requests': opt.serve = true; break;
		case '--ready': opt.ready = a[++i]; break;
		case '--end-session': opt.endSession = true; break;
		case '--list': opt.ops.push({ op: 'list' }); break;
		case '--resources': case '--templates': case '--prompts':
		case '--ping': case '--notes': case '--served':
			opt.ops.push({ op: a[i].slice(2) });
			break;
		case '--roots-changed':
			opt.ops.push({ op: 'roots-changed', arg:
			    a[i + 1] !== undefined && !a[i + 1].startsWith('--') ?
			    a[++i] : undefined });
			break;
		case '--read': case '--subscribe': case '--unsubscribe':
		case '--await': case '--listen': case '--await-served':
		case '--await-file':
			if (a[i + 1] === undefined)
				usage(`${a[i]} needs an argument`);
			opt.ops.push({ op: a[i].slice(2), arg: a[++i] });
			break;
		case '--prompt':
		case '--call': {
			const op = { op: a[i].slice(2), tool: a[++i], args: {} };
			if (!op.tool)
				usage(`--${op.op} needs a name`);
			// An optional JSON argument object follows.
			if (a[i + 1] !== undefined && !a[i + 1].startsWith('--')) {
				try {
					op.args = JSON.parse(a[++i]);
				} catch (e) {
					usage(`ARGS_JSON: ${e.message}`);
				}
			}
			opt.ops.push(op);
			break;
		}
		case '--cancel': {
			const op = { op: 'cancel', tool: a[++i], file: a[i + 2] };
			try {
				op.args = JSON.parse(a[++i]);
			} catch (e) {
				usage(`--cancel ARGS_JSON: ${e && e.message}`);
			}
			i++;
			if (!op.tool || !op.file)
				usage('--cancel TOOL ARGS_JSON FILE');
			opt.ops.push(op);
			break;
		}
		case '--stdio':
			opt.stdio = a.slice(i + 1);
			i = a.length;
			break;
		default: usage(`unknown option ${a[i]}`);
		}
	}
	if (opt.ops.length === 0)
		usage('an operation (--list, --call TOOL, ...) is required');
	if (!!opt.url === !!opt.stdio)
		usage('exactly one of --url and --stdio');
	if (opt.stdio && opt.stdio.length === 0)
		usage('--stdio needs a command');
	if (!(opt.timeout > 0))
		usage('bad --timeout');
}

// A hard bound on the whole run: a scenario must never hang on a bridge
// that does not answer.
const timer = setTimeout(() => {
	process.stderr.write(`mcp_client.mjs: timed out after ${opt.timeout} ms\n`);
	process.exit(1);
}, opt.timeout);

// What the transport sends, by HTTP method, for --listen.
const sent = { GET: 0, POST: 0, DELETE: 0 };
const countingFetch = (url, init) => {
	const m = (init && init.method) || 'GET';
	sent[m] = (sent[m] || 0) + 1;
	return fetch(url, init).then((r) => {
		if (m === 'GET' && r.ok && opt.ready)
			fs.writeFileSync(opt.ready, 'open\n');
		return r;
	});
};
const transport = opt.url ?
    new StreamableHTTPClientTransport(new URL(opt.url),
	{ requestInit: { headers: opt.headers }, fetch: countingFetch }) :
    new StdioClientTransport({ command: opt.stdio[0],
	args: opt.stdio.slice(1), stderr: 'ignore' });
const client = new Client({ name: 'sluice-e2e', version: '1.0.0' },
    opt.serve ? { capabilities: { sampling: {}, elicitation: {},
	roots: { listChanged: true } } } : {});
// The method of every server request this client answered, for --served.
const served = [];
if (opt.serve) {
	client.setRequestHandler(CreateMessageRequestSchema, async () => {
		served.push('sampling/createMessage');
		return { role: 'assistant', model: 'e2e-model',
		    content: { type: 'text', text: 'sampled by the client' } };
	});
	client.setRequestHandler(ElicitRequestSchema, async () => {
		served.push('elicitation/create');
		return { action: 'accept', content: { answer: 'yes' } };
	});
	client.setRequestHandler(ListRootsRequestSchema, async () => {
		served.push('roots/list');
		return { roots: [{ uri: 'file:///work', name: 'work' }] };
	});
}
// Every notification the server sends, in order, for --await and --notes.
const notes = [];
client.fallbackNotificationHandler = async (n) => { notes.push(n); };

// Every page of one listing (bounded: a server that pages forever is an
// error).
async function listAll(fn, key) {
	const items = [];
	let cursor, pages = 0;
	for (; pages < 100; ) {
		const r = await fn(cursor ? { cursor } : {});
		pages++;
		items.push(...r[key]);
		cursor = r.nextCursor;
		if (!cursor)
			return { [key]: items, pages };
	}
	throw new Error('more than 100 pages');
}

// A refusal is an outcome to judge, not a failure of the client.
async function orError(p) {
	try {
		return await p;
	} catch (e) {
		if (e && typeof e.code === 'number')
			return { error: { code: e.code, message: e.message } };
		throw e;
	}
}

try {
	await client.connect(transport);
	for (const op of opt.ops) {
		let out;
		if (op.op === 'list') {
			const tools = [];
			let cursor;
			// Bounded: a server that pages forever is an error.
			for (let page = 0; page < 100; page++) {
				const r = await client.listTools(cursor ? { cursor } : {});
				tools.push(...r.tools);
				cursor = r.nextCursor;
				if (!cursor)
					break;
			}
			out = { tools };
		} else if (op.op === 'resources') {
			out = await listAll((p) => client.listResources(p),
			    'resources');
		} else if (op.op === 'templates') {
			out = await listAll((p) => client.listResourceTemplates(p),
			    'resourceTemplates');
		} else if (op.op === 'prompts') {
			out = await listAll((p) => client.listPrompts(p), 'prompts');
		} else if (op.op === 'read') {
			out = await orError(client.readResource({ uri: op.arg }));
		} else if (op.op === 'prompt') {
			out = await orError(client.getPrompt({ name: op.tool,
			    arguments: op.args }));
		} else if (op.op === 'subscribe') {
			out = await orError(client.subscribeResource({ uri: op.arg }));
		} else if (op.op === 'unsubscribe') {
			out = await orError(client.unsubscribeResource({
			    uri: op.arg }));
		} else if (op.op === 'ping') {
			out = await client.ping();
		} else if (op.op === 'await') {
			// Polled with a bounded number of pings: the bridge
			// delivers a notification with its next answer.
			let n = 0;
			while (!notes.some((x) => x.method === op.arg)) {
				if (++n > 200)
					throw new Error(`no ${op.arg}`);
				await client.ping();
				await new Promise((r) => setTimeout(r, 50));
			}
			out = { seen: op.arg };
		} else if (op.op === 'listen') {
			// No request at all: bounded by --timeout only.
			const posts = sent.POST;
			while (!notes.some((x) => x.method === op.arg))
				await new Promise((r) => setTimeout(r, 20));
			out = { seen: op.arg, posts: sent.POST - posts,
			    gets: sent.GET };
		} else if (op.op === 'notes') {
			out = { notes };
		} else if (op.op === 'cancel') {
			const ac = new AbortController();
			let done = false;
			const call = client.callTool({ name: op.tool,
			    arguments: op.args }, undefined, { signal: ac.signal,
				timeout: opt.timeout }).then((r) => { done = true;
				    return r; }, (e) => { done = true; throw e; });
			while (!done && !fs.existsSync(op.file))
				await new Promise((r) => setTimeout(r, 50));
			if (!done)
				ac.abort('cancelled by the scenario');
			try {
				out = await call;
			} catch (e) {
				if (!ac.signal.aborted)
					throw e;
				out = { cancelled: true };
			}
			// The SDK posts the cancel without waiting for it, and
			// closing would abort that post: stay until FILE.done.
			while (!fs.existsSync(op.file + '.done'))
				await new Promise((r) => setTimeout(r, 50));
		} else if (op.op === 'roots-changed') {
			let n = 0;
			for (;;) {
				await client.sendRootsListChanged();
				n++;
				const until = Date.now() + 200;
				while (op.arg && !served.includes(op.arg) &&
				    Date.now() < until)
					await new Promise((r) => setTimeout(r, 20));
				if (!op.arg || served.includes(op.arg) || n >= 50)
					break;
			}
			out = { served, sent: n };
		} else if (op.op === 'await-file') {
			while (!fs.existsSync(op.arg))
				await new Promise((r) => setTimeout(r, 20));
			out = { file: op.arg };
		} else if (op.op === 'await-served') {
			while (!served.includes(op.arg))
				await new Promise((r) => setTimeout(r, 20));
			out = { served };
		} else if (op.op === 'served') {
			out = { served };
		} else {
			out = await client.callTool({ name: op.tool,
			    arguments: op.args });
		}
		process.stdout.write(JSON.stringify(out) + '\n');
	}
	clearTimeout(timer);
	if (opt.endSession && opt.url)
		await transport.terminateSession();
	await client.close();
	process.exit(0);
} catch (e) {
	process.stderr.write(`mcp_client.mjs: ${e && e.message ? e.message : e}\n`);
	process.exit(1);
}
