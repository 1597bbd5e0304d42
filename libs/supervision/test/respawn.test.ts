import { describe, expect, it } from 'vitest';
import { defaults, type RespawnConfig } from '@lanes/contracts';
import { DEFAULT_RESPAWN_CONFIG, evaluateRespawn, recordDeath, respawnBackoffMs } from '@lanes/supervision';

const NOW = 1_700_000_000_000;
const CFG: RespawnConfig = { baseDelayMs: 100, maxDelayMs: 1_000, windowMs: 10_000 };

describe('respawnBackoffMs: n ≤ 1 → 0, else min(max, base × 2^(n−2))', () => {
  it.each<[number, number]>([
    [0, 0],
    [1, 0],
    [2, 100],
    [3, 200],
    [4, 400],
    [5, 800],
    [6, 1_000], // 1600 capped
    [7, 1_000],
    [1_000, 1_000], // no Infinity
  ])('%i deaths → %i ms', (n, ms) => {
    expect(respawnBackoffMs(n, CFG)).toBe(ms);
  });

  it('a zero base never backs off (no 0 × Infinity)', () => {
    expect(respawnBackoffMs(5_000, { ...CFG, baseDelayMs: 0 })).toBe(0);
  });

  it('defaults: 0, 250, 500, … capped at 30 s', () => {
    expect(DEFAULT_RESPAWN_CONFIG).toEqual({
      baseDelayMs: defaults.DEFAULT_RESPAWN_BASE_DELAY_MS,
      maxDelayMs: defaults.DEFAULT_RESPAWN_MAX_DELAY_MS,
      windowMs: defaults.DEFAULT_RESPAWN_WINDOW_MS,
    });
    expect([1, 2, 3, 9, 10].map((n) => respawnBackoffMs(n, DEFAULT_RESPAWN_CONFIG))).toEqual([0, 250, 500, 30_000, 30_000]);
  });
});

describe('evaluateRespawn', () => {
  it.each<[string, number[], 'respawn' | 'wait', number]>([
    ['no deaths', [], 'respawn', 0],
    ['first death: at once', [NOW], 'respawn', 0],
    ['second death now: wait base', [NOW - 50, NOW], 'wait', 100],
    ['third death now: wait 2 × base', [NOW - 60, NOW - 50, NOW], 'wait', 200],
    // backoff runs from the latest death: until = latest + backoff
    ['second death, 1 ms before until', [NOW - 5_000, NOW - 99], 'wait', 1],
    ['second death, at until', [NOW - 5_000, NOW - 100], 'respawn', 0],
    ['second death, 1 ms after until', [NOW - 5_000, NOW - 101], 'respawn', 0],
    // window boundary on the older death: inside while now − t < windowMs
    ['older death at now − windowMs + 1 still counts', [NOW - CFG.windowMs + 1, NOW], 'wait', 100],
    ['older death at exactly now − windowMs aged out', [NOW - CFG.windowMs, NOW], 'respawn', 0],
    ['older death at now − windowMs − 1 aged out', [NOW - CFG.windowMs - 1, NOW], 'respawn', 0],
    ['unsorted history', [NOW, NOW - 50], 'wait', 100],
    ['capped', [NOW - 9, NOW - 8, NOW - 7, NOW - 6, NOW - 5, NOW - 4, NOW - 3, NOW], 'wait', 1_000],
  ])('%s → %s %i ms', (_name, deaths, action, delayMs) => {
    const d = evaluateRespawn({ deaths }, CFG, NOW);
    expect(d.action).toBe(action);
    expect(d.delayMs).toBe(delayMs);
    if (d.action === 'wait') expect(d.until).toBe(NOW + delayMs);
    expect(d.reason).toBeTruthy();
  });

  it('gives the same answer whenever it is re-evaluated', () => {
    const history = { deaths: [NOW - 10, NOW] };
    const a = evaluateRespawn(history, CFG, NOW);
    const b = evaluateRespawn(history, CFG, NOW + 40);
    expect(a).toMatchObject({ action: 'wait', until: NOW + 100 });
    expect(b).toMatchObject({ action: 'wait', until: NOW + 100, delayMs: 60 });
  });
});

describe('recordDeath', () => {
  it.each<[string, number[], number[]]>([
    ['empty', [], [NOW]],
    ['keeps deaths inside the window', [NOW - 10, NOW - CFG.windowMs + 1], [NOW - CFG.windowMs + 1, NOW - 10, NOW]],
    ['drops a death at exactly now − windowMs', [NOW - CFG.windowMs, NOW - 10], [NOW - 10, NOW]],
    ['drops everything old', [NOW - 50_000, NOW - 20_000], [NOW]],
  ])('%s', (_name, deaths, expected) => {
    const input = { deaths };
    const copy = structuredClone(input);
    expect(recordDeath(input, NOW, CFG).deaths).toEqual(expected);
    expect(input).toEqual(copy);
  });

  it('record then evaluate: 1st death respawns at once, 2nd waits base, 3rd waits 2 × base', () => {
    let h = { deaths: [] as number[] };
    h = recordDeath(h, NOW, CFG);
    expect(evaluateRespawn(h, CFG, NOW)).toMatchObject({ action: 'respawn', delayMs: 0 });
    h = recordDeath(h, NOW + 1, CFG);
    expect(evaluateRespawn(h, CFG, NOW + 1)).toMatchObject({ action: 'wait', delayMs: 100, until: NOW + 101 });
    h = recordDeath(h, NOW + 200, CFG);
    expect(evaluateRespawn(h, CFG, NOW + 200)).toMatchObject({ action: 'wait', delayMs: 200, until: NOW + 400 });
  });
});
