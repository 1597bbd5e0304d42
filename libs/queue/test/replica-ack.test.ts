import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { ReplicaAck, afterReplicaAck, createRedis, keys, replicaAckFor, shouldAskReplica, type ReplicaAckState } from '@lanes/queue';
import { startRedis, startSentinelGroup, waitFor, type TestSentinelGroup } from '../../../test/harness/index.js';

const BACKOFF_MS = 30_000;
const T = 1_000_000;

describe('replica ack decisions', () => {
  it.each<[string, ReplicaAckState, number, boolean]>([
    ['never degraded', {}, T, true],
    ['degraded, within the backoff', { degradedUntilMs: T + 1 }, T, false],
    ['degraded, the backoff over', { degradedUntilMs: T }, T, true],
  ])('asks a replica: %s', (_name, state, now, expected) => {
    expect(shouldAskReplica(state, now)).toBe(expected);
  });

  it.each<[string, ReplicaAckState, 'acked' | 'timed-out' | 'failed', ReturnType<typeof afterReplicaAck>]>([
    ['acked while healthy', {}, 'acked', { state: {} }],
    ['acked after a lapse: recovered', { degradedUntilMs: T - 1 }, 'acked', { state: {}, change: 'recovered' }],
    ['timed out while healthy: degraded for the backoff', {}, 'timed-out', { state: { degradedUntilMs: T + BACKOFF_MS }, change: 'degraded' }],
    ['failed while healthy: degraded', {}, 'failed', { state: { degradedUntilMs: T + BACKOFF_MS }, change: 'degraded' }],
    ['timed out again after the backoff: degraded again, said once', { degradedUntilMs: T - 1 }, 'timed-out', { state: { degradedUntilMs: T + BACKOFF_MS } }],
  ])('%s', (_name, state, outcome, expected) => {
    expect(afterReplicaAck(state, outcome, T, BACKOFF_MS)).toEqual(expected);
  });
});

/** On real redis-servers: a primary with a replica under three sentinels, and one Redis alone. */
describe('ReplicaAck on real Redis', () => {
  let group: TestSentinelGroup;
  beforeAll(async () => {
    group = await startSentinelGroup();
  }, 60_000);
  afterAll(async () => {
    await group?.stop();
  });

  it('asks nothing where there is no replica to wait for (one Redis, no Sentinel)', async () => {
    const alone = await startRedis();
    const redis = createRedis(alone.url);
    try {
      expect(replicaAckFor(redis, { log: pino({ level: 'silent' }), now: Date.now })).toBeUndefined();
    } finally {
      redis.disconnect();
      await alone.stop();
    }
  });

  it('acks once the replica has the writes; a stopped replica times out, runs go on without for the backoff, and a replica back is asked again', async () => {
    const redis = createRedis(group.url);
    // A replica just synced sends its first acknowledgement within a second or so: waited for here, once.
    await redis.set('replica-ack-warmup', '1');
    expect(await redis.wait(1, 10_000)).toBe(1);
    let nowMs = T;
    const lines: Array<{ event?: string }> = [];
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const ack = replicaAckFor(redis, { log, now: () => nowMs, timeoutMs: 200, backoffMs: BACKOFF_MS })!;
    expect(ack).toBeInstanceOf(ReplicaAck);
    const replica = group.nodes[1]!;
    try {
      await redis.set('replica-ack-test', 'written before the ack');
      expect(await ack.ack()).toBe('acked');
      const onReplica = group.connect(replica.port);
      try {
        // Everything written before the ack is on the replica: the write above and the ack's own.
        expect(await onReplica.get('replica-ack-test')).toBe('written before the ack');
        expect(await onReplica.get(keys.replicaAck())).toBe(String(T));
      } finally {
        onReplica.disconnect();
      }

      process.kill(replica.pid!, 'SIGSTOP');
      try {
        const started = performance.now();
        expect(await ack.ack()).toBe('timed-out');
        expect(performance.now() - started).toBeGreaterThanOrEqual(190);
        expect(lines.filter((l) => l.event === 'redis.replica-lagging')).toHaveLength(1);
        nowMs += BACKOFF_MS - 1;
        expect(await ack.ack()).toBe('skipped');
      } finally {
        process.kill(replica.pid!, 'SIGCONT');
      }
      nowMs += 1;
      await waitFor('the replica to ack again', async () => (await ack.ack()) === 'acked', { timeoutMs: 20_000 });
      expect(lines.filter((l) => l.event === 'redis.replica-acking')).toHaveLength(1);
    } finally {
      ack.close();
      redis.disconnect();
    }
  }, 60_000);
});
