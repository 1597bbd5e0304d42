/**
 * The HTTP client of bench/enqueue.ts, in a process of its own (forked by it), so that the API's
 * process spends its CPU on the server only, as it does when a board posts from elsewhere.
 *
 * It answers each message from its parent with the milliseconds the posts took, timed here.
 */
import { Agent, request as httpRequest } from 'node:http';

/** What the parent asks for: one bulk POST of `cards`, or `count` single POSTs from `clients` at once. */
export type ClientTask = { kind: 'bulk'; url: string; cards: unknown[] } | { kind: 'singles'; url: string; lane: string; prefix: string; count: number; clients: number };
export type ClientReply = { ok: true; ms: number } | { ok: false; error: string };

/** One JSON POST over a keep-alive agent: `node:http` without fetch's per-request machinery. */
export function postJson(agent: Agent, url: string, path: string, body: unknown): Promise<{ status: number; text: string }> {
  const payload = JSON.stringify(body);
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { agent, hostname, port, path, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** Posts as the task says and returns the milliseconds it took; any status ≥ 300 is an error. */
export async function runTask(agent: Agent, task: ClientTask): Promise<number> {
  const post = async (body: unknown) => {
    const res = await postJson(agent, task.url, '/v1/cards', body);
    if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
  };
  const t0 = performance.now();
  if (task.kind === 'bulk') await post({ cards: task.cards });
  else {
    // C clients, each posting its share one after another, as C boards (or one board's C workers) would.
    let next = 0;
    await Promise.all(
      Array.from({ length: task.clients }, async () => {
        for (let i = next++; i < task.count; i = next++) await post({ id: `${task.prefix}-${i}`, lane: task.lane, title: 'trivial' });
      }),
    );
  }
  return performance.now() - t0;
}

if (process.send) {
  const agent = new Agent({ keepAlive: true });
  process.on('message', (task: ClientTask) => {
    runTask(agent, task).then(
      (ms) => process.send!({ ok: true, ms } satisfies ClientReply),
      (err: unknown) => process.send!({ ok: false, error: String(err) } satisfies ClientReply),
    );
  });
  process.on('disconnect', () => {
    agent.destroy();
  });
}
