#!/usr/bin/env node
// tests/bench/bench_mcp.mjs: the MCP load client of `make bench`.
//
// The bridge's added cost is what a real agent pays per tools/call, so the
// client is the official TypeScript SDK (from tests/e2e/node_modules, given
// as E2E_NODE_MODULES) driving one session, the same against Sluice's
// bridge, the upstream server directly (stdio) and a Node MCP proxy. After
// WARM untimed calls it makes N sequential `echo` calls and prints the
// microseconds of each, one a line, then "rate <calls/s>" over the timed
// calls. Every result must be the echo (not isError), or the run fails: a
// refusing bridge must never look fast. Bounded by --secs.
//
// --sessions S opens S sessions (each its own client and connection) and,
// once all are warm, makes them call at once, N calls each: the latencies
// of all S*N calls, and "rate" over the wall time of the whole burst.
//
// --ping times MCP `ping` requests instead: answered by the bridge itself
// (no upstream, no audit record), they measure what the HTTP transport and
// the client cost, so that a tools/call's added latency can be split into
// transport and pipeline.
//
//   node bench_mcp.mjs (--url URL [--header 'K: V']... | --stdio CMD ARG...)
//        [--n N] [--warm W] [--secs S] [--sessions S] [--ping]
// Exit status 0, 1 on any error (message on stderr), 2 on usage.

import { pathToFileURL } from 'node:url';

const nm = process.env.E2E_NODE_MODULES;
if (!nm) {
	process.stderr.write('bench_mcp.mjs: E2E_NODE_MODULES not set\n');
	process.exit(2);
}
const sdk = `${nm}/@modelcontextprotocol/sdk/dist/esm/client`;
const { Client } = await import(pathToFileURL(`${sdk}/index.js`));
const { StreamableHTTPClientTransport } =
    await import(pathToFileURL(`${sdk}/streamableHttp.js`));
const { StdioClientTransport } = await import(pathToFileURL(`${sdk}/stdio.js`));

const opt = { headers: {}, n: 200, warm: 20, secs: 30, sessions: 1 };
{
	const a = process.argv.slice(2);
	for (let i = 0; i < a.length; i++) {
		switch (a[i]) {
		case '--url': opt.url = a[++i]; break;
		case '--header': {
			const h = a[++i] || '';
			const c = h.indexOf(':');
			if (c <= 0) {
				process.stderr.write(`bench_mcp.mjs: bad header\n`);
				process.exit(2);
			}
			opt.headers[h.slice(0, c).trim()] = h.slice(c + 1).trim();
			break;
		}
		case '--n': opt.n = Number(a[++i]); break;
		case '--warm': opt.warm = Number(a[++i]); break;
		case '--secs': opt.secs = Number(a[++i]); break;
		case '--ping': opt.ping = true; break;
		case '--sessions': opt.sessions = Number(a[++i]); break;
		case '--stdio': opt.stdio = a.slice(i + 1); i = a.length; break;
		default:
			process.stderr.write(`bench_mcp.mjs: unknown option ${a[i]}\n`);
			process.exit(2);
		}
	}
	if (!!opt.url === !!opt.stdio || !(opt.n > 0 && opt.n <= 100000) ||
	    !(opt.warm >= 0) || !(opt.secs > 0 && opt.secs <= 600) ||
	    !(opt.sessions >= 1 && opt.sessions <= 256) ||
	    (opt.sessions > 1 && !opt.url)) {
		process.stderr.write('bench_mcp.mjs: bad arguments\n');
		process.exit(2);
	}
}

const timer = setTimeout(() => {
	process.stderr.write(`bench_mcp.mjs: timed out after ${opt.secs} s\n`);
	process.exit(1);
}, opt.secs * 1000);

function newClient() {
	const transport = opt.url ?
	    new StreamableHTTPClientTransport(new URL(opt.url),
		{ requestInit: { headers: opt.headers } }) :
	    new StdioClientTransport({ command: opt.stdio[0],
		args: opt.stdio.slice(1), stderr: 'ignore' });
	const client = new Client({ name: 'sluice-bench', version: '1.0.0' });
	return { client, transport };
}

async function call(client, i) {
	if (opt.ping) {
		// An empty result object is the only right answer (ping spec).
		const r = await client.ping();
		if (!r || typeof r !== 'object' || Object.keys(r).length !== 0)
			throw new Error(`unexpected ping result: ${JSON.stringify(r).slice(0, 200)}`);
		return;
	}
	const msg = `bench ${i}`;
	const r = await client.callTool({ name: 'echo',
	    arguments: { message: msg } });
	const t = r && !r.isError && Array.isArray(r.content) && r.content[0] &&
	    r.content[0].text;
	if (typeof t !== 'string' || !t.includes(msg))
		throw new Error(`unexpected result: ${JSON.stringify(r).slice(0, 200)}`);
}

// One session's timed calls, their microseconds appended to out.
async function burst(client, out) {
	for (let i = 0; i < opt.n; i++) {
		const s = process.hrtime.bigint();
		await call(client, i);
		out.push(Number(process.hrtime.bigint() - s) / 1000);
	}
}

try {
	const cs = [], ts = [];
	for (let k = 0; k < opt.sessions; k++) {
		const c = newClient();
		await c.client.connect(c.transport);
		cs.push(c.client);
		ts.push(c.transport);
	}
	await Promise.all(cs.map(async (c) => {
		for (let i = 0; i < opt.warm; i++)
			await call(c, i);
	}));
	const out = [];
	const t0 = process.hrtime.bigint();
	await Promise.all(cs.map((c) => burst(c, out)));
	const tot = Number(process.hrtime.bigint() - t0) / 1e9;
	process.stdout.write(out.map((v) => v.toFixed(1)).join('\n') + '\n');
	process.stdout.write(`rate ${(out.length / tot).toFixed(1)}\n`);
	clearTimeout(timer);
	// Ended as a client should (DELETE), so the server frees the
	// session and its event stream now, not when it next writes to it.
	if (opt.url)
		await Promise.all(ts.map((t) => t.terminateSession().catch(() => {})));
	await Promise.all(cs.map((c) => c.close()));
	process.exit(0);
} catch (e) {
	// fetch's own message says nothing: the cause names the socket error.
	const why = e && e.cause ? `: ${e.cause.code || e.cause.message || e.cause}` : '';
	process.stderr.write(`bench_mcp.mjs: ${e && e.message ? e.message : e}${why}\n`);
	process.exit(1);
}
