import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SoakApi } from './api.js';
import { parseSoakArgs } from './args.js';
import { FaultRunner } from './faults.js';
import { isSameProcess, killQuietly } from './proc.js';
import { ask, dataNodeArgs, sentinelConf, startSentinelRedis, type SoakRedis } from './redis-group.js';
import type { Topology } from './topology.js';

describe('dataNodeArgs and sentinelConf', () => {
  it('a data node: AOF with fsync always, loopback and the given addresses, announced at the group address, a replica when told', () => {
    const args = dataNodeArgs({ port: 7001, dir: '/d', bind: ['10.213.5.254'], announce: '10.213.5.254', replicaOf: { host: '10.213.5.254', port: 7000 } });
    expect(args.join(' ')).toBe(
      '--port 7001 --bind 127.0.0.1 10.213.5.254 --protected-mode no --dir /d --appendonly yes --appendfsync always --save  --daemonize no --maxmemory-policy noeviction --repl-diskless-sync-delay 0 --replica-announce-ip 10.213.5.254 --replicaof 10.213.5.254 7000',
    );
    expect(dataNodeArgs({ port: 7000, dir: '/d', bind: [] })).not.toContain('--replicaof');
  });

  it('a sentinel: every address the group address, so a worker in a namespace is told a primary it can reach; its peers and the replica known up front', () => {
    const conf = sentinelConf({
      port: 7100,
      dir: '/s',
      address: '10.213.5.254',
      name: 'soak',
      primaryPort: 7000,
      replicaPort: 7001,
      downAfterMs: 10_000,
      failoverTimeoutMs: 3_000,
      quorum: 2,
      myId: 'a'.repeat(40),
      peers: [
        { port: 7100, id: 'a'.repeat(40) },
        { port: 7101, id: 'b'.repeat(40) },
      ],
    });
    expect(conf.split('\n')).toEqual([
      'port 7100',
      'bind 127.0.0.1 10.213.5.254',
      'protected-mode no',
      'dir /s',
      'sentinel announce-ip 10.213.5.254',
      'sentinel monitor soak 10.213.5.254 7000 2',
      'sentinel down-after-milliseconds soak 10000',
      'sentinel failover-timeout soak 3000',
      'sentinel parallel-syncs soak 1',
      `sentinel myid ${'a'.repeat(40)}`,
      'sentinel known-replica soak 10.213.5.254 7001',
      `sentinel known-sentinel soak 10.213.5.254 7101 ${'b'.repeat(40)}`,
      '',
    ]);
  });
});

/**
 * The soak's Sentinel group and its two Redis faults, on real redis-server processes: a failover
 * promotes the replica and brings the old primary back as its replica; a Redis kill restarts the
 * primary within down-after and it stays primary; a second failover promotes the first node again.
 */
describe('the soak Sentinel group under its faults', () => {
  const started: Array<{ pid: number; startTime: number; label: string }> = [];
  const dir = mkdtempSync(join(tmpdir(), 'lanes-soak-sentinel-test-'));
  afterAll(() => {
    for (const p of started) if (isSameProcess(p.pid, p.startTime)) killQuietly(p.pid);
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails over and back, re-posts an accepted card the new primary lacks, and a Redis kill stays a restart', async () => {
    const logsDir = join(dir, 'logs');
    mkdirSync(logsDir);
    const redis: SoakRedis = await startSentinelRedis({ dir, logsDir, bind: [], env: process.env, register: (m) => started.push(m), address: '127.0.0.1', downAfterMs: 2_500 });
    const [a, b] = redis.sentinel!.nodes;
    expect(await redis.primary()).toBe(a);
    // c1 and c2 exist; c3 is "accepted" after the snapshot but never written: the new primary lacks it.
    await ask(a!.port, async (c) => {
      await c.hset('lanes-store:card:c1', 'state', 'queued');
      await c.rpush('lanes-store:card:c1:history', '{"state":"queued"}');
      await c.hset('lanes-store:card:c2', 'state', 'done');
      await c.rpush('lanes-store:card:c2:history', '{"state":"queued"}', '{"state":"done"}');
      await c.call('WAIT', '1', '5000');
    });
    let calls = 0;
    const reposted: string[][] = [];
    const topology = {
      redis,
      settled: async () => {
        while (!(await redis.ready())) await new Promise((r) => setTimeout(r, 100));
      },
    } as unknown as Topology;
    const runner = new FaultRunner({
      topology,
      api: {} as SoakApi,
      args: parseSoakArgs(['--failovers', '2', '--redis-kills', '1', '--outage-ms', '300', '--down-after-ms', '2500']),
      enqueued: () => (calls++ === 0 ? ['c1', 'c2'] : ['c1', 'c2', 'c3']),
      repost: async (ids) => {
        reposted.push([...ids]);
        return true;
      },
      log: () => undefined,
    });

    await runner.run({ kind: 'failover', atMs: 0, pick: 0 });
    expect(runner.injected.at(-1)!.skipped).toBeUndefined();
    expect(runner.failovers).toHaveLength(1);
    const f = runner.failovers[0]!;
    expect(f).toMatchObject({
      oldPrimary: `redis-a :${a!.port}`,
      newPrimary: `redis-b :${b!.port}`,
      cardsRead: 2,
      vanished: [],
      movesLost: [],
      reposted: ['c3'],
      oldPrimaryRejoined: true,
      lostBytes: 0,
    });
    expect(f.promotedAtMs - f.atMs).toBeGreaterThanOrEqual(2_500);
    expect(reposted).toEqual([['c3']]);
    expect(await redis.primary()).toBe(b);
    expect(await ask(a!.port, async (c) => ((await c.call('ROLE')) as string[])[0])).toBe('slave');
    expect(await ask(a!.port, (c) => c.hget('lanes-store:card:c2', 'state'))).toBe('done');

    await runner.run({ kind: 'redis-kill', atMs: 0, pick: 0 });
    expect(runner.injected.at(-1)!.note).toMatch(/still the primary after its restart/);
    expect(runner.redisKillsFailedOver).toBe(0);
    expect(await redis.primary()).toBe(b);
    expect(await ask(b!.port, (c) => c.hget('lanes-store:card:c2', 'state'))).toBe('done');

    await runner.run({ kind: 'failover', atMs: 0, pick: 0 });
    expect(runner.failovers.map((x) => x.newPrimary)).toEqual([`redis-b :${b!.port}`, `redis-a :${a!.port}`]);
    expect(runner.failovers[1]!.oldPrimaryRejoined).toBe(true);
    expect(await redis.primary()).toBe(a);
  }, 120_000);
});
