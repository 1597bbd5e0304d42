import { describe, expect, it } from 'vitest';
import type { SandboxEnd } from './logs.js';
import { judgeVanish, judgeVanishes, type VanishCause, type VanishContext } from './provider-vanishes.js';
import type { WorkerLife } from './reconcile.js';
import type { SandboxSighting } from './sandbox-watch.js';

const T = 1_800_000_000_000;
const WORKER = 'host-42-abcd1234';
/** Seen alive from T - 5 s to T - 500 ms, found gone at T. */
const sighting: SandboxSighting & { goneAtMs: number } = {
  sandboxId: 'sb-a',
  worker: WORKER,
  slot: `${WORKER}-soak-0`,
  firstSeenAtMs: T - 5_000,
  lastSeenAtMs: T - 500,
  goneAtMs: T,
  gone: 'process-dead',
};
const owner: WorkerLife = { label: 'worker-0.0', workerId: WORKER, startedAtMs: T - 10_000, partitions: [], killed: false };
const ctx = (over: Partial<VanishContext> = {}): VanishContext => ({ sandboxKills: [], workers: [owner], sandboxEnds: [], partitionGraceMs: 4_000, ...over });
const said = (event: SandboxEnd['event'], atMs: number, over: Partial<SandboxEnd> = {}): SandboxEnd => ({ atMs, label: 'worker-0.0', sandboxId: 'sb-a', event, ...over });

describe('judgeVanish: a sandbox the provider showed alive, then gone', () => {
  it.each<[string, Partial<SandboxSighting>, Partial<VanishContext>, VanishCause]>([
    ['owner alive and connected, nothing said', {}, {}, 'unexplained'],
    ['killed by the soak', {}, { sandboxKills: [{ sandboxId: 'sb-a', atMs: T - 300 }] }, 'soak-kill'],
    ['killed by the soak as it was seen gone', {}, { sandboxKills: [{ sandboxId: 'sb-a', atMs: T }] }, 'soak-kill'],
    ['a soak kill 1 ms after it was seen gone', {}, { sandboxKills: [{ sandboxId: 'sb-a', atMs: T + 1 }] }, 'unexplained'],
    ['a soak kill of another sandbox', {}, { sandboxKills: [{ sandboxId: 'sb-b', atMs: T - 300 }] }, 'unexplained'],
    ['its owner exited as it was seen gone', {}, { workers: [{ ...owner, endedAtMs: T, killed: true }] }, 'owner-gone'],
    ['its owner exited 1 ms after', {}, { workers: [{ ...owner, endedAtMs: T + 1 }] }, 'unexplained'],
    ['the soak began stopping its owner', {}, { workers: [{ ...owner, stoppedAtMs: T - 100 }] }, 'owner-gone'],
    ['the soak stopped its owner 1 ms after', {}, { workers: [{ ...owner, stoppedAtMs: T + 1 }] }, 'unexplained'],
    ['its owner cut off from Redis', {}, { workers: [{ ...owner, partitions: [[T - 3_000, T + 3_000]] }] }, 'owner-gone'],
    ['last seen alive within the grace after the heal', {}, { workers: [{ ...owner, partitions: [[T - 9_000, T - 4_500]] }] }, 'owner-gone'],
    ['last seen alive 1 ms past the grace', {}, { workers: [{ ...owner, partitions: [[T - 9_000, T - 4_501]] }] }, 'unexplained'],
    ['a partition that began 1 ms after it was seen gone', {}, { workers: [{ ...owner, partitions: [[T + 1, T + 3_000]] }] }, 'unexplained'],
    ['its owner recycled it', {}, { sandboxEnds: [said('sandbox.recycled', T - 200)] }, 'owner'],
    ['its owner released it, logged as it was seen gone', {}, { sandboxEnds: [said('sandbox.released', T)] }, 'owner'],
    ['its owner terminated it, logged 1 ms after it was seen gone', {}, { sandboxEnds: [said('sandbox.terminated', T + 1)] }, 'unexplained'],
    ['its owner declared it dead while it was still seen alive (wedged)', {}, { sandboxEnds: [said('sandbox.dead', T - 500)] }, 'owner'],
    // Declared dead after it was last seen alive: the owner found it exited or missing, it did not end it.
    ['its owner declared it dead 1 ms after it was last seen alive', {}, { sandboxEnds: [said('sandbox.dead', T - 499)] }, 'unexplained'],
    ['another worker recycled a sandbox of that id', {}, { sandboxEnds: [said('sandbox.recycled', T - 200, { label: 'worker-1.0' })] }, 'unexplained'],
    ['its owner recycled another sandbox', {}, { sandboxEnds: [said('sandbox.recycled', T - 200, { sandboxId: 'sb-b' })] }, 'unexplained'],
    ['an owner named by the slot only', { worker: undefined }, { sandboxEnds: [said('sandbox.recycled', T - 200)] }, 'owner'],
    ['an owner the soak cannot name', { worker: 'elsewhere', slot: 'elsewhere-soak-0' }, {}, 'unexplained'],
  ])('%s → %s', (_, over, context, cause) => {
    expect(judgeVanish({ ...sighting, ...over }, ctx(context)).cause).toBe(cause);
  });

  it('says what decided an unexplained one, with what the owner logged after', () => {
    expect(judgeVanish(sighting, ctx({ sandboxEnds: [said('sandbox.dead', T + 20, { reason: 'poll: sandbox exited(137)' })] })).why).toBe(
      `owner worker-0.0 alive and connected; last seen alive at ${new Date(T - 500).toISOString()}, gone at ${new Date(T).toISOString()} (process-dead); it logged sandbox.dead at ${new Date(T + 20).toISOString()} (poll: sandbox exited(137))`,
    );
  });
});

describe('judgeVanishes', () => {
  it('counts the sandboxes seen, and judges only the ones seen gone, by cause', () => {
    const alive: SandboxSighting = { ...sighting, sandboxId: 'sb-live', goneAtMs: undefined, gone: undefined };
    const r = judgeVanishes(
      [
        sighting,
        alive,
        { ...sighting, sandboxId: 'sb-k' },
        { ...sighting, sandboxId: 'sb-r' },
        { ...sighting, sandboxId: 'sb-g', worker: 'host-43-ffff0000', slot: 'host-43-ffff0000-soak-0' },
      ],
      ctx({
        sandboxKills: [{ sandboxId: 'sb-k', atMs: T - 400 }],
        sandboxEnds: [said('sandbox.recycled', T - 100, { sandboxId: 'sb-r' })],
        workers: [owner, { label: 'worker-1.0', workerId: 'host-43-ffff0000', startedAtMs: T - 10_000, endedAtMs: T - 600, partitions: [], killed: true }],
      }),
    );
    expect({ ...r, verdicts: r.verdicts.map((v) => [v.sandboxId, v.cause]) }).toEqual({
      seen: 5,
      total: 4,
      bySoak: 1,
      byOwner: 1,
      ownerGone: 1,
      unexplained: 1,
      verdicts: [
        ['sb-a', 'unexplained'],
        ['sb-k', 'soak-kill'],
        ['sb-r', 'owner'],
        ['sb-g', 'owner-gone'],
      ],
    });
  });
});
