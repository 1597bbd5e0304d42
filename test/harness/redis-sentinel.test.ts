import { afterEach, describe, expect, it } from 'vitest';
import { redisIdentity, startRedis, type TestRedis } from './redis-server.js';
import { startSentinelGroup, type TestSentinelGroup } from './redis-sentinel.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The harness's Sentinel group: its own processes, a real promotion, and a stop that ends exactly what it started. */
describe('harness: startSentinelGroup', () => {
  let group: TestSentinelGroup | undefined;
  let bystander: TestRedis | undefined;
  afterEach(async () => {
    await group?.stop().catch(() => undefined);
    await bystander?.stop().catch(() => undefined);
    group = bystander = undefined;
  });

  it('starts a primary, its replica and three sentinels; kill -9 of the primary promotes the replica; stop ends those five and nothing else', async () => {
    bystander = await startRedis();
    group = await startSentinelGroup({ password: 'data-pw', sentinelPassword: 'sentinel-pw' });
    const [first, second] = group.nodes;
    expect(group.url).toMatch(/^redis\+sentinel:\/\/:data-pw@127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/lanes\?sentinelPassword=sentinel-pw$/);
    const pids = group.pids();
    expect(pids).toHaveLength(5);
    for (const pid of pids) expect(alive(pid)).toBe(true);
    expect(await group.primaryPort()).toBe(first!.port);
    // Its nodes ask for the password: the identity probe without it sees nothing.
    expect(await redisIdentity(first!.port)).toBeUndefined();

    const primary = group.connect(first!.port);
    const replica = group.connect(second!.port);
    try {
      expect(((await replica.call('ROLE')) as string[])[0]).toBe('slave');
      await primary.set('before-failover', '1');
      expect(await primary.wait(1, 5_000)).toBe(1);

      const old = await group.killPrimary();
      expect(old).toBe(first!.port);
      expect(alive(first!.pid!)).toBe(false);
      const promoted = await group.waitForPromotion(old);
      expect(promoted).toBe(second!.port);
      expect(await group.primaryPort()).toBe(second!.port);
      expect(((await replica.call('ROLE')) as string[])[0]).toBe('master');
      // What reached the replica before the kill is there on the new primary.
      expect(await replica.get('before-failover')).toBe('1');
    } finally {
      primary.disconnect();
      replica.disconnect();
    }

    await group.stop();
    group = undefined;
    for (const pid of pids) expect(alive(pid)).toBe(false);
    expect(alive(bystander.pid!)).toBe(true);
    expect(await redisIdentity(bystander.port)).toMatchObject({ pid: bystander.pid });
  });
});
