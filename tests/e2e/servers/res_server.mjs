#!/usr/bin/env node
// tests/e2e/servers/res_server.mjs: an MCP server over stdio with resources
// and prompts, for t_bridge_res.sh. Written without the SDK so that every
// answer is exactly what the scenario needs: a resource list in pages (the
// bridge must pass the cursor through and filter each page), secrets in a
// text and in a blob, contents under a URI the policy hides, subscriptions
// and notifications on demand. One JSON-RPC message per line.
//
//   node res_server.mjs FLAGDIR
//
// Every resources/read, prompts/get, resources/subscribe and unsubscribe
// is appended to FLAGDIR/calls.log ("METHOD NAME" a line) so the scenario
// can tell what reached the upstream. The tool `touch` adds a resource
// and a prompt, then sends resources/list_changed, prompts/list_changed
// and resources/updated for note://docs/readme and note://private/a.
import fs from 'node:fs';
import readline from 'node:readline';

const dir = process.argv[2];
if (!dir) {
	process.stderr.write('usage: res_server.mjs FLAGDIR\n');
	process.exit(2);
}
const AWS = 'AKIAIOSFODNN7EXAMPLE';
let added = false;

function send(o) { process.stdout.write(JSON.stringify(o) + '\n'); }
function log(line) { fs.appendFileSync(dir + '/calls.log', line + '\n'); }

function resources() {
	const r = ['note://docs/readme', 'note://private/a', 'note://docs/aws',
	    'note://docs/blob', 'note://hr/salaries', 'note://ask/x',
	    'note://private/b', 'note://docs/multi'];
	if (added)
		r.push('note://docs/new');
	return r.map((uri) => ({ uri, name: uri.split('/').pop(),
	    mimeType: 'text/plain' }));
}

function prompts() {
	const p = [
		{ name: 'summarize', description: 'Summarize a topic.',
		  arguments: [{ name: 'topic', required: true }] },
		{ name: 'secret', description: 'A prompt the policy denies.' },
		{ name: 'review', description: 'Review something.',
		  arguments: [{ name: 'what' }] },
		{ name: 'hr-brief', description: 'Classified text.' },
	];
	if (added)
		p.push({ name: 'fresh', description: 'Added later.' });
	return p;
}

function read(uri) {
	const env = process.env.API_TOKEN || '';
	switch (uri) {
	case 'note://docs/readme': return [{ uri, text: 'hello docs' }];
	case 'note://docs/new': return [{ uri, text: 'new doc' }];
	case 'note://docs/aws': return [{ uri, mimeType: 'text/plain',
	    text: `the key is ${AWS} and the token ${env}` }];
	case 'note://docs/blob': return [{ uri, mimeType:
	    'application/octet-stream', blob: Buffer.from(
	    `\u0000\u0001bin ${AWS} cred=${env} end\u0000`).toString('base64') }];
	case 'note://docs/multi': return [{ uri, text: 'visible part' },
	    { uri: 'note://private/leak', text: 'LEAKED PRIVATE TEXT' }];
	case 'note://hr/salaries': return [{ uri, text: 'alice: 100' }];
	case 'note://ask/x': return [{ uri, text: 'asked and answered' }];
	case 'note://private/a': case 'note://private/b':
		return [{ uri, text: 'PRIVATE' }];
	}
	return null;
}

function prompt(name, args) {
	const msg = (text) => ({ messages: [{ role: 'user',
	    content: { type: 'text', text } }] });
	switch (name) {
	case 'summarize': return msg(`Summarize ${args.topic}; key ${AWS}`);
	case 'secret': return msg('SECRET PROMPT TEXT');
	case 'review': return msg(`Review ${args.what || 'it'}`);
	case 'hr-brief': return msg('HR brief: salaries are confidential');
	case 'fresh': return msg('fresh prompt');
	}
	return null;
}

const PAGE = 3;

function handle(m) {
	const p = m.params || {};
	const ok = (result) => send({ jsonrpc: '2.0', id: m.id, result });
	const err = (code, message) => send({ jsonrpc: '2.0', id: m.id,
	    error: { code, message } });
	switch (m.method) {
	case 'initialize':
		return ok({ protocolVersion: p.protocolVersion || '2025-06-18',
		    capabilities: { tools: {}, resources: { subscribe: true,
		    listChanged: true }, prompts: { listChanged: true } },
		    serverInfo: { name: 'res', version: '1' } });
	case 'ping': return ok({});
	case 'tools/list':
		return ok({ tools: [{ name: 'touch', description: 'Change '
		    + 'the lists.', inputSchema: { type: 'object' } }] });
	case 'tools/call':
		added = true;
		send({ jsonrpc: '2.0',
		    method: 'notifications/resources/list_changed' });
		send({ jsonrpc: '2.0',
		    method: 'notifications/prompts/list_changed' });
		for (const uri of ['note://docs/readme', 'note://private/a'])
			send({ jsonrpc: '2.0', method:
			    'notifications/resources/updated', params: { uri,
			    title: 'ignored' } });
		return ok({ content: [{ type: 'text', text: 'touched' }] });
	case 'resources/list': {
		const all = resources();
		const off = p.cursor ? Number(p.cursor.replace(/^p/, '')) : 0;
		if (!Number.isInteger(off) || off < 0 || off > all.length)
			return err(-32602, 'bad cursor');
		const r = { resources: all.slice(off, off + PAGE) };
		if (off + PAGE < all.length)
			r.nextCursor = 'p' + (off + PAGE);
		return ok(r);
	}
	case 'resources/templates/list':
		return ok({ resourceTemplates: [
		    { uriTemplate: 'note://docs/{name}', name: 'docs' },
		    { uriTemplate: 'note://private/{id}', name: 'private' }] });
	case 'resources/read': {
		log(`read ${p.uri}`);
		const c = read(p.uri);
		return c ? ok({ contents: c }) :
		    err(-32002, 'Resource not found');
	}
	case 'resources/subscribe':
	case 'resources/unsubscribe':
		log(`${m.method.split('/')[1]} ${p.uri}`);
		return ok({});
	case 'prompts/list': return ok({ prompts: prompts() });
	case 'prompts/get': {
		log(`prompt ${p.name}`);
		const r = prompt(p.name, p.arguments || {});
		return r ? ok(r) : err(-32602, 'Unknown prompt');
	}
	}
	if (m.id !== undefined)
		err(-32601, 'Method not found');
}

// One message a line; a line that is not JSON is reported and skipped.
readline.createInterface({ input: process.stdin, terminal: false })
    .on('line', (line) => {
	if (line.trim() === '')
		return;
	try {
		handle(JSON.parse(line));
	} catch (e) {
		process.stderr.write(`res_server: ${e.message}\n`);
	}
    })
    .on('close', () => process.exit(0));
