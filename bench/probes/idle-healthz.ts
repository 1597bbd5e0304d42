/**
 * The throughput bench's control for `/healthz`: a `node:http` server in a process of its own that
 * does nothing but answer `GET /healthz`. Probed beside lanes in the same run, its tail is what the
 * box alone (its scheduler, its load) adds to any answer; what lanes' tail has beyond it is lanes'.
 *
 * Forked by the bench; sends `{ port }` once it listens on 127.0.0.1, and exits when disconnected.
 */
import { createServer } from 'node:http';

export type IdleHealthzReady = { port: number };

if (process.send) {
  const server = createServer((req, res) => {
    const ok = req.url === '/healthz';
    res.writeHead(ok ? 200 : 404, { 'content-type': 'application/json' });
    res.end(ok ? '{"ok":true}' : '{}');
  });
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address();
    process.send!({ port: typeof addr === 'object' && addr ? addr.port : 0 } satisfies IdleHealthzReady);
  });
  process.on('disconnect', () => server.close());
}
