import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WorkerReadiness } from '@lanes/worker';

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

/**
 * Probes for a container without the API (a `lanes worker` or `lanes supervisor`): GET /healthz
 * answers 200 while the process's event loop does (liveness never depends on Redis: restarting a
 * worker because Redis is away would only hand its cards around), and GET /readyz answers 200 or
 * 503 with the reason.
 */
export async function startHealthServer(opts: { port: number; host?: string; readiness: () => WorkerReadiness }): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET') return reply(405, { error: { code: 'METHOD_NOT_ALLOWED', message: 'GET only' } });
    if (req.url === '/healthz') return reply(200, { status: 'ok' });
    if (req.url === '/readyz') {
      const r = opts.readiness();
      return reply(r.ready ? 200 : 503, { status: r.ready ? 'ready' : 'not-ready', reason: r.reason });
    }
    return reply(404, { error: { code: 'NOT_FOUND', message: `no route ${req.url}` } });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
