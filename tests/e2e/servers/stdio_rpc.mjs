// tests/e2e/servers/stdio_rpc.mjs: the MCP stdio transport's framing for
// the small hand-written servers of the tests (one JSON-RPC message a line
// each way), so that each server says only what it answers.
//
//   serveStdio(handle): calls handle(message) for every line of stdin that
//   parses (a line that does not is answered -32700 by itself); the
//   process exits when stdin ends. send(object) writes one message.

export function send(o) {
	process.stdout.write(JSON.stringify(o) + '\n');
}

export function serveStdio(handle) {
	let buf = '';
	process.stdin.setEncoding('utf8');
	process.stdin.on('data', (d) => {
		buf += d;
		let i;
		while ((i = buf.indexOf('\n')) >= 0) {
			const line = buf.slice(0, i);
			buf = buf.slice(i + 1);
			if (!line.trim())
				continue;
			let m;
			try {
				m = JSON.parse(line);
			} catch {
				send({ jsonrpc: '2.0', id: null,
				    error: { code: -32700, message: 'parse error' } });
				continue;
			}
			handle(m);
		}
	});
	process.stdin.on('end', () => process.exit(0));
}
