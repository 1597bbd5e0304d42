import { describe, expect, it } from 'vitest';
import { checkSentinelArgs, downAfterMsOf, parseSoakArgs, resolveCounts, SoakUsageError } from './args.js';

describe('parseSoakArgs: --failovers and --down-after-ms', () => {
  it('has no failover unless asked for, however long the run', () => {
    const a = parseSoakArgs(['--cards', '2000', '--minutes', '18']);
    expect(a.failovers).toBe(0);
    expect(resolveCounts(a).failovers).toBe(0);
  });

  it('takes a failover count, and a down-after only with failovers', () => {
    expect(resolveCounts(parseSoakArgs(['--failovers', '2'])).failovers).toBe(2);
    expect(() => parseSoakArgs(['--down-after-ms', '5000'])).toThrow(/--down-after-ms: only with --failovers/);
    expect(() => parseSoakArgs(['--failovers=-1'])).toThrow(SoakUsageError);
  });

  it('keeps a Redis kill a restart: down-after defaults to the outage plus 4 s when Redis kills are planned, else 1 s', () => {
    // The acceptance run: 2 Redis kills of 6 s and a failover.
    expect(downAfterMsOf(parseSoakArgs(['--failovers', '1', '--redis-kills', '2', '--outage-ms', '6000']))).toBe(10_000);
    // Redis kills unset still scale to at least one.
    expect(downAfterMsOf(parseSoakArgs(['--failovers', '1', '--outage-ms', '3000']))).toBe(7_000);
    expect(downAfterMsOf(parseSoakArgs(['--failovers', '1', '--redis-kills', '0']))).toBe(1_000);
    expect(downAfterMsOf(parseSoakArgs(['--failovers', '1', '--redis-kills', '0', '--down-after-ms', '2500']))).toBe(2_500);
  });

  it('refuses a down-after that would let the sentinels fail over during a Redis kill, naming the flag and the least it takes', () => {
    expect(() => parseSoakArgs(['--failovers', '1', '--redis-kills', '1', '--outage-ms', '6000', '--down-after-ms', '7999'])).toThrow(
      /--down-after-ms: 7999 ms would let the sentinels fail over during a Redis kill .* at least --outage-ms \+ 2000 \(8000\), or --redis-kills 0/,
    );
    expect(() => parseSoakArgs(['--failovers', '1', '--redis-kills', '1', '--outage-ms', '6000', '--down-after-ms', '8000'])).not.toThrow();
    expect(() => checkSentinelArgs(parseSoakArgs(['--failovers', '1', '--redis-kills', '0', '--down-after-ms', '100']))).not.toThrow();
  });
});

describe('parseSoakArgs: keyed and supersede cards', () => {
  it('posts none by default, and the lane has no key limit', () => {
    const a = parseSoakArgs(['--cards', '60']);
    expect({ keyedShare: a.keyedShare, supersedeShare: a.supersedeShare, maxRunningPerKey: a.maxRunningPerKey }).toEqual({
      keyedShare: 0,
      supersedeShare: 0,
      maxRunningPerKey: undefined,
    });
  });

  it.each<[string, string[], Partial<ReturnType<typeof parseSoakArgs>>]>([
    ['a keyed share gives the lane one per key by default', ['--keyed-share', '0.3'], { keyedShare: 0.3, maxRunningPerKey: 1, concurrencyKeys: 3 }],
    [
      'or the limit and pool asked for',
      ['--keyed-share', '1', '--max-running-per-key', '2', '--concurrency-keys', '5'],
      { keyedShare: 1, maxRunningPerKey: 2, concurrencyKeys: 5 },
    ],
    ['a supersede share alone', ['--supersede-share', '0.2'], { supersedeShare: 0.2, maxRunningPerKey: undefined }],
  ])('%s', (_, argv, want) => {
    expect(parseSoakArgs(argv)).toMatchObject(want);
  });

  it.each<[string[], RegExp]>([
    [['--keyed-share', '1.5'], /--keyed-share: /],
    [['--keyed-share=-0.1'], /--keyed-share: /],
    [['--supersede-share', 'half'], /--supersede-share: /],
    [['--keyed-share', '0.3', '--max-running-per-key', '0'], /--max-running-per-key: /],
    [['--keyed-share', '0.3', '--concurrency-keys', '0'], /--concurrency-keys: /],
    [['--max-running-per-key', '2'], /--max-running-per-key: only with --keyed-share above 0/],
  ])('refuses %j, naming the flag', (argv, message) => {
    expect(() => parseSoakArgs(argv)).toThrow(SoakUsageError);
    expect(() => parseSoakArgs(argv)).toThrow(message);
  });
});
