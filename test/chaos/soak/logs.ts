import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What the soak reads from the stack's own pino logs (one JSON object per line). */
export interface LogFacts {
  /** Worker id per worker instance label (from the `worker` binding of its first line that has one). */
  workerIds: Map<string, string>;
  reaps: Array<{ atMs: number; sandboxId: string; slot?: string; owner?: string; reason?: string }>;
  /** `sandbox.reaped` lines with no sandbox id: kept, so the verdict can count them as reaps it cannot judge. */
  unnamedReaps: Array<{ atMs: number; slot?: string; reason?: string }>;
  forgotten: Array<{ atMs: number; worker: string }>;
  /** Sandboxes the workers declared dead. */
  deadSandboxes: Set<string>;
  /** What the workers did with runs that lost Redis or their card: fenced, committed late, refused as stale, discarded. */
  runEvents: Array<{ atMs: number; event: RunEvent; label: string; cardId?: string }>;
  /** What each worker instance said it did to one of its own sandboxes: ended it on purpose, or declared it dead. */
  sandboxEnds: SandboxEnd[];
}

/**
 * A worker's own lines about ending one of its sandboxes (apps/worker slot.ts, terminator.ts):
 * recycled or released between cards, terminated (retired, or a terminate retried until it held),
 * and declared dead (it then terminates it by id and respawns).
 */
export const SANDBOX_END_EVENTS = ['sandbox.recycled', 'sandbox.released', 'sandbox.terminated', 'sandbox.dead'] as const;
export type SandboxEndEvent = (typeof SANDBOX_END_EVENTS)[number];
const isSandboxEndEvent = (e: unknown): e is SandboxEndEvent => (SANDBOX_END_EVENTS as readonly unknown[]).includes(e);
export interface SandboxEnd {
  atMs: number;
  /** The worker instance whose log said it. */
  label: string;
  sandboxId: string;
  event: SandboxEndEvent;
  reason?: string;
}

/** The run-fate events the soak counts (apps/worker processor.ts, libs/queue card-store.ts). */
export const RUN_EVENTS = ['card.fenced', 'card.late-commit', 'card.stale-write', 'card.discarded'] as const;
export type RunEvent = (typeof RUN_EVENTS)[number];
const isRunEvent = (e: unknown): e is RunEvent => (RUN_EVENTS as readonly unknown[]).includes(e);

function lines(path: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line cut short by a kill -9
    }
  }
  return out;
}

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** The worker id a worker instance logs under, once its log has a line that names it. */
export function workerIdIn(logsDir: string, label: string): string | undefined {
  try {
    return lines(join(logsDir, `${label}.log`))
      .map((l) => str(l.worker))
      .find((id) => id !== undefined);
  } catch {
    return undefined;
  }
}

export function readLogFacts(logsDir: string): LogFacts {
  const facts: LogFacts = { workerIds: new Map(), reaps: [], unnamedReaps: [], forgotten: [], deadSandboxes: new Set(), runEvents: [], sandboxEnds: [] };
  for (const file of readdirSync(logsDir)) {
    if (!file.endsWith('.log')) continue;
    const label = file.slice(0, -'.log'.length);
    for (const l of lines(join(logsDir, file))) {
      const time = typeof l.time === 'number' ? l.time : 0;
      if (label.startsWith('worker-') && !facts.workerIds.has(label) && str(l.worker)) facts.workerIds.set(label, str(l.worker)!);
      if (isRunEvent(l.event)) {
        const cardId = str(l.cardId) ?? str(l.card);
        facts.runEvents.push({ atMs: time, event: l.event, label, ...(cardId ? { cardId } : {}) });
      }
      if (label.startsWith('worker-') && isSandboxEndEvent(l.event) && str(l.sandboxId)) {
        facts.sandboxEnds.push({ atMs: time, label, sandboxId: str(l.sandboxId)!, event: l.event, ...(str(l.reason) ? { reason: str(l.reason)! } : {}) });
      }
      switch (l.event) {
        case 'sandbox.reaped': {
          const sandboxId = str(l.sandboxId);
          const where = {
            ...(str(l.slot) ? { slot: str(l.slot)! } : {}),
            ...(str(l.reason) ? { reason: str(l.reason)! } : {}),
          };
          if (sandboxId) facts.reaps.push({ atMs: time, sandboxId, ...where, ...(str(l.owner) ? { owner: str(l.owner)! } : {}) });
          else facts.unnamedReaps.push({ atMs: time, ...where });
          break;
        }
        case 'worker.forgotten':
          if (str(l.worker)) facts.forgotten.push({ atMs: time, worker: str(l.worker)! });
          break;
        case 'sandbox.dead':
          if (str(l.sandboxId)) facts.deadSandboxes.add(str(l.sandboxId)!);
          break;
      }
    }
  }
  return facts;
}
