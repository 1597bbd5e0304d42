import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMonitor } from '../../bench/support/monitor.js';
import { startRedis, waitFor, type TestRedis } from '../harness/index.js';

/** The throughput bench counts commands per card with this reader; ioredis's monitor mode lost them under load. */
describe('bench: MONITOR reader', () => {
  let redis: TestRedis;
  let conn: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url);
  });
  afterAll(async () => {
    conn.disconnect();
    await redis.stop();
  });

  it('starts while Redis runs a flood of commands, and sees them, with their source', async () => {
    let flooding = true;
    let sent = 0;
    const flood = (async () => {
      while (flooding) {
        const p = conn.pipeline();
        for (let i = 0; i < 200; i++) p.set(`flood-${i}`, 'v');
        await p.exec();
        sent += 200;
      }
    })();
    await waitFor('the flood to run', () => sent >= 1000);
    const own = `${conn.stream.localAddress}:${conn.stream.localPort}`;
    const sources = new Set<string>();
    let sets = 0;
    // Started (and restarted) mid-flood: MONITOR's +OK shares its reads with a stream of commands.
    for (let i = 0; i < 5; i++) {
      const monitor = await startMonitor(redis.url);
      const before = sets;
      monitor.onCommand((name, source) => {
        if (name === 'set') sets++;
        sources.add(source);
      });
      await waitFor('the monitor to see the flood', () => sets >= before + 1000);
      monitor.close();
    }
    flooding = false;
    await flood;
    expect([...sources]).toEqual([own]);
  });

  it('tells commands run by a script from the client that ran it, whatever their arguments hold', async () => {
    const monitor = await startMonitor(redis.url);
    const seen: Array<[string, string]> = [];
    monitor.onCommand((name, source) => seen.push([name, source]));
    await conn.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, 'quoted "key"', 'line\r\nbreak "and" \\ slash');
    await conn.ping();
    await waitFor('the ping', () => seen.some(([name]) => name === 'ping'));
    monitor.close();
    const own = `${conn.stream.localAddress}:${conn.stream.localPort}`;
    expect(seen).toEqual([
      ['eval', own],
      ['set', 'lua'],
      ['ping', own],
    ]);
  });
});
