/**
 * The throughput bench's `/healthz` prober, in a process of its own (forked by it), as a load
 * balancer or a kubelet probes from elsewhere: a new connection per probe, one probe at a time,
 * every `intervalMs`. Its latencies are the server's answer time plus the wire, with no client
 * work on the server's event loop. Several URLs are probed in turn, one per tick, so each sees the
 * same moments of the run (the bench probes lanes and an idle server side by side).
 *
 * Messages: `{ start: urls, intervalMs }` starts probing; `{ stop: true }` stops and is answered
 * with `{ latenciesMs }`, one list per URL.
 */
import { get } from 'node:http';

export type ProbeRequest = { start: string[]; intervalMs: number } | { stop: true };
export type ProbeReply = { latenciesMs: number[][] } | { error: string };

function probeOnce(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    // agent: false, a connection of its own, as a probe makes.
    const req = get(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`${url} answered ${res.statusCode}`))));
    });
    req.on('error', reject);
  });
}

if (process.send) {
  let running: Promise<void> | undefined;
  let stopping = false;
  let latencies: number[][] = [];
  let failure: string | undefined;
  process.on('message', (message: ProbeRequest) => {
    if ('start' in message) {
      const urls = message.start;
      stopping = false;
      latencies = urls.map(() => []);
      failure = undefined;
      running = (async () => {
        for (let tick = 0; !stopping; tick++) {
          const i = tick % urls.length;
          try {
            latencies[i]!.push(await probeOnce(urls[i]!));
          } catch (err) {
            failure ??= String(err);
          }
          await new Promise((r) => setTimeout(r, message.intervalMs));
        }
      })();
      return;
    }
    stopping = true;
    void running?.then(() => process.send!((failure ? { error: failure } : { latenciesMs: latencies.map((l) => [...l]) }) satisfies ProbeReply));
  });
  process.on('disconnect', () => {
    stopping = true;
  });
}
