import { type ChildProcess, fork } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import type { ProbeReply, ProbeRequest } from '../../bench/support/health-probe.js';
import type { IdleHealthzReady } from '../../bench/probes/idle-healthz.js';
import { waitFor } from '../harness/index.js';

const benchFile = (name: string) => new URL(`../../bench/${name}`, import.meta.url).pathname;
/** The bench forks these under tsx, as its own process runs; so does this test. */
const forkTs = (name: string) => fork(benchFile(name), [], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });

/** The throughput bench's /healthz prober and its control, the idle server, each in a process of its own. */
describe('bench: /healthz prober and idle server', () => {
  const children: ChildProcess[] = [];
  let slow: Server | undefined;
  afterAll(() => {
    for (const c of children) if (c.connected) c.disconnect();
    slow?.close();
  });

  it('probes two servers in turn, a connection per probe, and answers each one its own latencies', async () => {
    const idle = forkTs('probes/idle-healthz.ts');
    const prober = forkTs('support/health-probe.ts');
    children.push(idle, prober);
    const port = await new Promise<number>((resolve) => idle.once('message', (m: IdleHealthzReady) => resolve(m.port)));
    // A server that answers /healthz 30 ms late, and counts its connections.
    let connections = 0;
    slow = createServer((_req, res) => setTimeout(() => res.end('{"ok":true}'), 30));
    slow.on('connection', () => connections++);
    await new Promise<void>((resolve) => slow!.listen(0, '127.0.0.1', resolve));
    const slowPort = (slow.address() as { port: number }).port;

    prober.send({ start: [`http://127.0.0.1:${slowPort}/healthz`, `http://127.0.0.1:${port}/healthz`], intervalMs: 5 } satisfies ProbeRequest);
    await waitFor('a few probes of the slow server', () => connections >= 5);
    const reply = await new Promise<ProbeReply>((resolve) => {
      prober.once('message', resolve);
      prober.send({ stop: true } satisfies ProbeRequest);
    });
    if ('error' in reply) throw new Error(reply.error);
    const [slowMs, idleMs] = reply.latenciesMs;
    expect(slowMs!.length).toBeGreaterThanOrEqual(5);
    // In turn: the two lists differ by at most the probe in flight when stopped.
    expect(Math.abs(slowMs!.length - idleMs!.length)).toBeLessThanOrEqual(1);
    // Each list is its own server's: every slow probe waited out (most of) the 30 ms, and the idle server answered too.
    expect(Math.min(...slowMs!)).toBeGreaterThanOrEqual(25);
    expect(idleMs!.length).toBeGreaterThanOrEqual(4);
    // A new connection per probe, as a kubelet probes.
    expect(connections).toBe(slowMs!.length);
  });

  it('the idle server answers only /healthz', async () => {
    const idle = forkTs('probes/idle-healthz.ts');
    children.push(idle);
    const port = await new Promise<number>((resolve) => idle.once('message', (m: IdleHealthzReady) => resolve(m.port)));
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
  });
});
