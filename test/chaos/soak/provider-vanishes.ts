import type { SandboxKill } from './faults.js';
import type { SandboxEnd } from './logs.js';
import type { WorkerLife } from './reconcile.js';
import type { SandboxSighting } from './sandbox-watch.js';

/**
 * Why a sandbox the provider showed alive was later gone:
 * - `soak-kill`: the soak's sandbox-kill fault of that id, before it was seen gone;
 * - `owner-gone`: its owner had exited, the soak had begun stopping it (a kill -9 ends its
 *   sandboxes through their lifeline, a drain terminates them), or the soak had cut it off from
 *   Redis (within the partition and its grace, as reaps are judged);
 * - `owner`: its owner's own log ended it on purpose (recycled, released, terminated) before it
 *   was seen gone, or declared it dead while the provider still showed it alive (a wedged sandbox);
 * - `unexplained`: none of those, or the owner cannot be named. With its owner alive and connected,
 *   this is a false reap seen from the provider's side, whatever lanes logged about reaping.
 *
 * A death the owner only noticed (`sandbox.dead` after the sandbox was last seen alive: it was found
 * exited or missing) is not the owner's doing: that is exactly how a sandbox killed behind its
 * owner's back shows up in the owner's log.
 */
export type VanishCause = 'soak-kill' | 'owner-gone' | 'owner' | 'unexplained';

export interface VanishContext {
  sandboxKills: readonly Pick<SandboxKill, 'atMs' | 'sandboxId'>[];
  workers: readonly WorkerLife[];
  /** The workers' own lines about their sandboxes' ends. */
  sandboxEnds: readonly SandboxEnd[];
  /** A partition explains a vanish up to this long after it healed (ReconcileInput.partitionGraceMs). */
  partitionGraceMs: number;
}

export interface VanishVerdict {
  sandboxId: string;
  cause: VanishCause;
  /** What decided it, for the report. */
  why: string;
}

export interface ProviderVanishes {
  /** Sandboxes the watcher saw alive at least once. */
  seen: number;
  /** Of those, the ones later seen gone, by cause. */
  total: number;
  bySoak: number;
  byOwner: number;
  ownerGone: number;
  unexplained: number;
  verdicts: VanishVerdict[];
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The worker life a sighting's record names: by worker id, else by the slot id's `<worker>-` prefix. */
function ownerOf(s: SandboxSighting, workers: readonly WorkerLife[]): WorkerLife | undefined {
  return workers.find((w) => w.workerId !== undefined && (s.worker === w.workerId || (s.slot?.startsWith(`${w.workerId}-`) ?? false)));
}

/** The verdict on one sandbox seen gone (`goneAtMs` set); pure: the sighting and what the soak knows in, the cause out. */
export function judgeVanish(s: SandboxSighting & { goneAtMs: number }, ctx: VanishContext): VanishVerdict {
  const verdict = (cause: VanishCause, why: string): VanishVerdict => ({ sandboxId: s.sandboxId, cause, why });
  const kill = ctx.sandboxKills.find((k) => k.sandboxId === s.sandboxId && k.atMs <= s.goneAtMs);
  if (kill) return verdict('soak-kill', `killed by the soak at ${iso(kill.atMs)}`);
  const owner = ownerOf(s, ctx.workers);
  const seen = `last seen alive at ${iso(s.lastSeenAtMs)}, gone at ${iso(s.goneAtMs)} (${s.gone ?? 'gone'})`;
  if (!owner) return verdict('unexplained', `owner unknown (worker ${s.worker ?? '?'}, slot ${s.slot ?? '?'}); ${seen}`);
  if (owner.endedAtMs !== undefined && owner.endedAtMs <= s.goneAtMs) return verdict('owner-gone', `${owner.label} exited at ${iso(owner.endedAtMs)}`);
  if (owner.stoppedAtMs !== undefined && owner.stoppedAtMs <= s.goneAtMs) return verdict('owner-gone', `the soak began stopping ${owner.label} at ${iso(owner.stoppedAtMs)}`);
  const cut = owner.partitions.find(([from, to]) => s.goneAtMs >= from && s.lastSeenAtMs <= to + ctx.partitionGraceMs);
  if (cut) return verdict('owner-gone', `${owner.label} was cut off from Redis from ${iso(cut[0])}`);
  const said = ctx.sandboxEnds.filter((e) => e.label === owner.label && e.sandboxId === s.sandboxId);
  const own = said.find((e) => (e.event === 'sandbox.dead' ? e.atMs <= s.lastSeenAtMs : e.atMs <= s.goneAtMs));
  if (own) return verdict('owner', `${owner.label} logged ${own.event} at ${iso(own.atMs)}${own.reason ? ` (${own.reason})` : ''}`);
  const after = said.map((e) => `; it logged ${e.event} at ${iso(e.atMs)}${e.reason ? ` (${e.reason})` : ''}`).join('');
  return verdict('unexplained', `owner ${owner.label} alive and connected; ${seen}${after}`);
}

/** Every sighting judged: how many were seen, how many vanished, and why each did. */
export function judgeVanishes(sightings: readonly SandboxSighting[], ctx: VanishContext): ProviderVanishes {
  const verdicts = sightings.filter((s): s is SandboxSighting & { goneAtMs: number } => s.goneAtMs !== undefined).map((s) => judgeVanish(s, ctx));
  const count = (cause: VanishCause) => verdicts.filter((v) => v.cause === cause).length;
  return {
    seen: sightings.length,
    total: verdicts.length,
    bySoak: count('soak-kill'),
    byOwner: count('owner'),
    ownerGone: count('owner-gone'),
    unexplained: count('unexplained'),
    verdicts,
  };
}
