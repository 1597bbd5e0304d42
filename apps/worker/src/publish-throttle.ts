/** What one more change of a key asks for, given when it last went out and whether one is already due. */
export type ThrottleAction = { action: 'now' } | { action: 'later'; waitMs: number } | { action: 'none' };

export interface ThrottleSnapshot {
  /** When the key last went out; undefined if never. */
  lastAtMs?: number;
  /** A later run is already scheduled: it will carry this change too. */
  scheduled: boolean;
  nowMs: number;
}

/** Trailing-edge throttle: at once after a quiet interval, else once at the interval's end. */
export function decideThrottle(snapshot: ThrottleSnapshot, intervalMs: number): ThrottleAction {
  if (snapshot.scheduled) return { action: 'none' };
  if (snapshot.lastAtMs === undefined) return { action: 'now' };
  const waitMs = snapshot.lastAtMs + intervalMs - snapshot.nowMs;
  return waitMs <= 0 ? { action: 'now' } : { action: 'later', waitMs };
}

export interface PublishThrottleDeps<K> {
  intervalMs: number;
  now: () => number;
  /** Publishes the key's state as it is when called (so a late run carries the latest). */
  run: (key: K) => void;
}

/** Runs `decideThrottle` per key; `close` drops what is still scheduled (a stopped worker publishes nothing more). */
export class PublishThrottle<K> {
  private readonly lastAtMs = new Map<K, number>();
  private readonly timers = new Map<K, NodeJS.Timeout>();
  private closed = false;

  constructor(private readonly deps: PublishThrottleDeps<K>) {}

  changed(key: K): void {
    if (this.closed) return;
    const lastAtMs = this.lastAtMs.get(key);
    const decision = decideThrottle({ ...(lastAtMs !== undefined ? { lastAtMs } : {}), scheduled: this.timers.has(key), nowMs: this.deps.now() }, this.deps.intervalMs);
    if (decision.action === 'now') this.fire(key);
    else if (decision.action === 'later') {
      const timer = setTimeout(() => {
        this.timers.delete(key);
        this.fire(key);
      }, decision.waitMs);
      timer.unref();
      this.timers.set(key, timer);
    }
  }

  /** Goes out now, carrying any change still waiting. */
  now(key: K): void {
    if (this.closed) return;
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
    this.fire(key);
  }

  /** The key is gone (a retired slot): nothing more of it goes out. */
  forget(key: K): void {
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
    this.lastAtMs.delete(key);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  private fire(key: K): void {
    this.lastAtMs.set(key, this.deps.now());
    this.deps.run(key);
  }
}
