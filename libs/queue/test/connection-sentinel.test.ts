import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '@lanes/contracts';
import { createRedis } from '@lanes/queue';
import { SENTINEL_DETECTOR_IOREDIS_VERSION, dropsStaleFailoverDetector, installedIoredisVersion } from '../src/connection.js';
import { startSentinelGroup, waitFor, type TestSentinelGroup } from '../../../test/harness/index.js';

/** Which data node a connection is on, by the port that node reports. */
async function portOf(conn: Redis): Promise<number> {
  const info = await conn.info('server');
  return Number(/tcp_port:(\d+)/.exec(info)![1]);
}

describe('createRedis: the options a URL compiles to (no connection made)', () => {
  it('rediss+sentinel:// is TLS to the sentinels and to the primary they name, with both ACL users and passwords', () => {
    const conn = createRedis('rediss+sentinel://app:p%40ss@s1.invalid:26379,s2.invalid:26380/lanes?db=2&sentinelUsername=watcher&sentinelPassword=sp', { lazyConnect: true });
    expect(conn.options).toMatchObject({
      sentinels: [
        { host: 's1.invalid', port: 26379 },
        { host: 's2.invalid', port: 26380 },
      ],
      name: 'lanes',
      db: 2,
      username: 'app',
      password: 'p@ss',
      sentinelUsername: 'watcher',
      sentinelPassword: 'sp',
      tls: {},
      sentinelTLS: {},
      enableTLSForSentinelMode: true,
      failoverDetector: true,
      maxRetriesPerRequest: null,
    });
    // The API's own fail-fast connection overrides the default, as before.
    expect(createRedis('redis+sentinel://s1.invalid/lanes', { lazyConnect: true, maxRetriesPerRequest: 1 }).options.maxRetriesPerRequest).toBe(1);
    expect(createRedis('redis+sentinel://s1.invalid/lanes', { lazyConnect: true }).options.tls).toBeUndefined();
  });

  it("drops a closed socket's failover detector only under the ioredis whose connector it was read against", () => {
    // A new ioredis: re-read SentinelConnector (failoverDetector, connectToNext) and run the
    // Sentinel tests below before moving the version in connection.ts.
    expect(installedIoredisVersion).toBe(SENTINEL_DETECTOR_IOREDIS_VERSION);
    expect(dropsStaleFailoverDetector()).toBe(true);
    expect(dropsStaleFailoverDetector('5.12.0')).toBe(false);
  });

  it('a bad URL is a ConfigError naming the part, before any connection', () => {
    expect(() => createRedis('redis+sentinel://s1.invalid/lanes?sentinelPasword=x', { lazyConnect: true })).toThrow(ConfigError);
    expect(() => createRedis('redis+sentinel://s1.invalid/lanes?sentinelPasword=x', { lazyConnect: true })).toThrow(/redis\.query.*sentinelPasword/);
  });
});

/** createRedis on a real Sentinel group: every part's connections come from it, so this is what they all get. */
describe('createRedis on Sentinel', () => {
  let group: TestSentinelGroup | undefined;
  const conns: Redis[] = [];
  const track = (c: Redis) => {
    c.on('error', () => undefined);
    conns.push(c);
    return c;
  };
  afterEach(async () => {
    for (const c of conns.splice(0)) c.disconnect();
    await group?.stop();
    group = undefined;
  });

  it("finds the primary with the data nodes' and the sentinels' passwords, and so does its duplicate (BullMQ's blocking reader)", async () => {
    group = await startSentinelGroup({ password: 'data-pw', sentinelPassword: 'sentinel-pw' });
    const conn = track(createRedis(group.url));
    const blocking = track(conn.duplicate());
    expect(await portOf(conn)).toBe(group.nodes[0]!.port);
    expect(await portOf(blocking)).toBe(group.nodes[0]!.port);
    const popped = blocking.blpop('q', 5);
    await waitFor('the blocking read to be waiting', async () => Number(/blocked_clients:(\d+)/.exec(await conn.info('clients'))![1]) >= 1);
    await conn.rpush('q', 'x');
    expect(await popped).toEqual(['q', 'x']);
    expect(conn.options.maxRetriesPerRequest).toBeNull();
  });

  it('quit() closes its sockets to the sentinels too (before, a stopped lanes up never exited)', async () => {
    group = await startSentinelGroup();
    const watcher = track(createRedis(`redis://127.0.0.1:${group.sentinelPorts[0]}`));
    // Our own watcher counts as one.
    const clients = async () => Number(/connected_clients:(\d+)/.exec(await watcher.info('clients'))![1]);
    const baseline = await clients();
    for (const close of ['quit', 'disconnect'] as const) {
      const conn = createRedis(group.url);
      conn.on('error', () => undefined);
      const blocking = conn.duplicate();
      await Promise.all([conn.ping(), blocking.ping()]);
      await waitFor(`both connections' failover detectors subscribed (${close})`, async () => (await clients()) >= baseline + 2);
      if (close === 'quit') await Promise.all([conn.quit(), blocking.quit()]);
      else for (const c of [conn, blocking]) c.disconnect();
      await waitFor(`the sentinel's clients back to ${baseline} after ${close}`, async () => (await clients()) === baseline);
    }
  });

  it('a wrong sentinel password is refused, not ignored', async () => {
    group = await startSentinelGroup({ sentinelPassword: 'sentinel-pw' });
    const wrong = group.url.replace('sentinel-pw', 'not-it');
    const conn = track(createRedis(wrong, { maxRetriesPerRequest: 0, retryStrategy: () => null, sentinelRetryStrategy: () => null }));
    await expect(conn.ping()).rejects.toThrow();
  });

  it('a write across a kill -9 of the primary waits for the promotion and lands on the new primary', async () => {
    group = await startSentinelGroup();
    const conn = track(createRedis(group.url));
    await conn.set('k', 'before');
    expect(await conn.wait(1, 5_000)).toBe(1);
    const old = await group.killPrimary();
    const during = conn.set('k', 'during');
    const promoted = await group.waitForPromotion(old);
    await during;
    expect(await portOf(conn)).toBe(promoted);
    const direct = track(group.connect(promoted));
    expect(await direct.get('k')).toBe('during');
  });

  it('a connection whose primary froze (SIGSTOP) moves to the promoted replica when the sentinels announce it, instead of waiting on the frozen socket', async () => {
    group = await startSentinelGroup();
    const conn = track(createRedis(group.url));
    const frozen = group.nodes[0]!;
    expect(await portOf(conn)).toBe(frozen.port);
    process.kill(frozen.pid!, 'SIGSTOP');
    try {
      // Sent to the frozen primary: its socket stays open, so only the sentinels' word can move it.
      const during = conn.incr('n');
      const promoted = await group.waitForPromotion(frozen.port);
      expect(await during).toBe(1);
      expect(await portOf(conn)).toBe(promoted);
    } finally {
      // Killed while stopped: a frozen primary must not thaw into a second primary under the test.
      await frozen.kill();
    }
  });

  it("a failover announced while a reconnect is still asking a sentinel for the primary does not end the connection for good (ioredis 5's stale failover detector)", async () => {
    group = await startSentinelGroup();
    const conn = track(createRedis(group.url));
    const old = await group.primaryPort();
    expect(await conn.incr('n')).toBe(1);
    expect(await conn.wait(1, 5_000)).toBe(1);
    // ioredis asks the sentinel that found the primary first: a stopped one holds the lookup open
    // (the kernel still accepts the socket) for as long as this test needs it.
    const asked = track(createRedis(`redis://127.0.0.1:${group.sentinelPorts[0]}`));
    const askedPid = Number(/process_id:(\d+)/.exec(await asked.info('server'))![1]);
    const announcer = track(createRedis(`redis://127.0.0.1:${group.sentinelPorts[1]}`));
    const listener = track(createRedis(`redis://127.0.0.1:${group.sentinelPorts[1]}`));
    const oldPrimary = track(group.connect(old));
    // The connection's socket closes under it (as at a kill -9) while the sentinels still watch.
    const id = (await conn.client('ID')) as number;
    process.kill(askedPid, 'SIGSTOP');
    try {
      await oldPrimary.client('KILL', 'ID', String(id));
      await waitFor('the reconnect to be asking the stopped sentinel', () => conn.status === 'connecting');
      const during = conn.incr('n');
      const announced = new Promise<void>((resolve) => listener.once('message', () => resolve()));
      await listener.subscribe('+switch-master');
      await announcer.call('SENTINEL', 'FAILOVER', group.name);
      await announced;
      // One round trip after the announcement: the sentinel wrote it to every subscriber before it
      // answers this, so any detector still subscribed has heard it too.
      await announcer.ping();
      process.kill(askedPid, 'SIGCONT');
      // Before: the detector of the closed socket heard +switch-master, cut the lookup short, and
      // ioredis set the connection to `end`: this write failed with "Connection is closed".
      expect(await during).toBe(2);
      const promoted = await group.waitForPromotion(old);
      await waitFor('the connection to be on the new primary', async () => (await portOf(conn)) === promoted);
      expect(conn.status).toBe('ready');
    } finally {
      process.kill(askedPid, 'SIGCONT');
    }
  });

  it('writes in a loop across a manual failover (SENTINEL FAILOVER: the old primary stays up) never fail, and the connection ends on the new primary', async () => {
    group = await startSentinelGroup();
    const conn = track(createRedis(group.url));
    const sentinel = track(createRedis(`redis://127.0.0.1:${group.sentinelPorts[0]}`));
    const old = await group.primaryPort();
    let stop = false;
    let writes = 0;
    const writer = (async () => {
      while (!stop) {
        await conn.incr('n');
        writes++;
      }
    })();
    await waitFor('some writes on the old primary', () => writes >= 10);
    await sentinel.call('SENTINEL', 'FAILOVER', group.name);
    const promoted = await group.waitForPromotion(old);
    await waitFor('the connection to be on the new primary', async () => (await portOf(conn)) === promoted);
    const after = writes;
    await waitFor('writes on the new primary', () => writes >= after + 10);
    stop = true;
    await writer;
  });
});
