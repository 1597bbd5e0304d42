import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isSameProcess } from './proc.js';

/**
 * The watcher lists the provider's sandboxes this often. A vanish is placed between two samples, so
 * this is its precision: well inside a lock (4 s) and the supervisor's reap timeout, so the verdict
 * can tell a sandbox that died before its owner said anything about it from one its owner ended.
 */
export const WATCH_INTERVAL_MS = 500;

/**
 * The local provider's per-sandbox record, `<sandboxDir>/<id>/sandbox.json` (RECORD_FILE and
 * SandboxRecord in libs/sandbox/src/local/sandbox-registry.ts): only the fields the watcher reads.
 */
const RECORD_FILE = 'sandbox.json';
interface ProviderRecord {
  id: string;
  tags: { worker?: string; slot?: string };
  rootPid: number;
  rootStartTime: number;
}

/** One sandbox as the provider showed it: whose it was (its record's tags), and when it was seen alive and first seen gone. */
export interface SandboxSighting {
  sandboxId: string;
  /** The worker id and slot its record is tagged with. */
  worker?: string;
  slot?: string;
  firstSeenAtMs: number;
  /** The last sample that found its root process alive. */
  lastSeenAtMs: number;
  /** The first sample after that which found it gone; absent: alive at the last sample. */
  goneAtMs?: number;
  /** How: its root process dead (or a zombie, or another process under its pid), or its record removed. */
  gone?: 'process-dead' | 'record-removed';
}

export interface SandboxWatch {
  /** Takes a last sample, stops, and answers every sandbox seen. */
  stop(): SandboxSighting[];
}

function readRecord(dir: string): ProviderRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(join(dir, RECORD_FILE), 'utf8')) as Partial<ProviderRecord>;
    return typeof r.id === 'string' && Number.isInteger(r.rootPid) && Number.isInteger(r.rootStartTime) ? (r as ProviderRecord) : undefined;
  } catch {
    // not written yet (the provider makes the directory first), or removed meanwhile
    return undefined;
  }
}

/**
 * Samples the provider's own view every WATCH_INTERVAL_MS, independent of what lanes logs: each
 * record under `sandboxDir` and whether its root process (pid and start time, as recorded) still
 * runs. A sandbox is seen once its record names a live root; it is gone once a later sample finds
 * the root dead or the record removed.
 */
export function startSandboxWatch(sandboxDir: string, now: () => number = Date.now, intervalMs = WATCH_INTERVAL_MS): SandboxWatch {
  const seen = new Map<string, SandboxSighting>();
  const sample = () => {
    const at = now();
    let names: string[];
    try {
      names = readdirSync(sandboxDir);
    } catch {
      names = [];
    }
    const present = new Set(names);
    for (const name of names) {
      const record = readRecord(join(sandboxDir, name));
      if (!record || record.id !== name) continue;
      const known = seen.get(name);
      const alive = isSameProcess(record.rootPid, record.rootStartTime);
      if (alive && (!known || known.goneAtMs === undefined)) {
        if (known) known.lastSeenAtMs = at;
        else {
          seen.set(name, {
            sandboxId: name,
            ...(record.tags?.worker ? { worker: record.tags.worker } : {}),
            ...(record.tags?.slot ? { slot: record.tags.slot } : {}),
            firstSeenAtMs: at,
            lastSeenAtMs: at,
          });
        }
      } else if (!alive && known && known.goneAtMs === undefined) {
        known.goneAtMs = at;
        known.gone = 'process-dead';
      }
    }
    for (const s of seen.values()) {
      if (s.goneAtMs === undefined && !present.has(s.sandboxId)) {
        s.goneAtMs = at;
        s.gone = 'record-removed';
      }
    }
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      sample();
      return [...seen.values()];
    },
  };
}
