#!/usr/bin/env node
// tests/e2e/servers/conformance.mjs: runs the pinned MCP conformance suite
// (@modelcontextprotocol/conformance) on the Node this machine has. The
// suite's CLI imports fs.globSync, which Node 22 added; server mode never
// calls it (only tier-check does), so on an older Node the import is served
// by this file, which re-exports node:fs with a globSync that refuses.
//
//   node conformance.mjs ARGS...   (the suite's own arguments)
import fs from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { createRequire, register } from 'node:module';

export * from 'node:fs';
export default fs;
export const globSync = fs.globSync ?? (() => {
	throw new Error('fs.globSync needs Node 22 or later');
});

const SELF = import.meta.url;

// Module hook (runs in the loader thread): the suite's `fs` is this file,
// as a second instance (the query), which only re-exports.
export async function resolve(spec, ctx, next) {
	if (!fs.globSync && (spec === 'fs' || spec === 'node:fs') &&
	    ctx.parentURL && ctx.parentURL.includes('/@modelcontextprotocol/conformance/'))
		return { url: SELF + '?fs', shortCircuit: true };
	return next(spec, ctx);
}

if (isMainThread && !SELF.endsWith('?fs') && !globalThis.__sluiceConformance) {
	globalThis.__sluiceConformance = true;
	if (!fs.globSync)
		register(SELF);
	const req = createRequire(SELF);
	const pkg = req.resolve('@modelcontextprotocol/conformance/package.json');
	const meta = JSON.parse(fs.readFileSync(pkg, 'utf8'));
	const bin = typeof meta.bin === 'string' ? meta.bin : Object.values(meta.bin)[0];
	await import(new URL(bin, 'file://' + pkg).href);
}
