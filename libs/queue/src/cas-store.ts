import { isDeepStrictEqual } from 'node:util';
import type { Redis } from 'ioredis';

/** Attempts before a read-modify-write gives up under contention; each retry re-reads. */
export const CAS_MAX_ATTEMPTS = 50;
/** Jittered pause after a lost race, so two writers stop colliding in lock-step. */
const CAS_RETRY_JITTER_MS = 5;

/**
 * Read-modify-write of one JSON value, atomic across processes (WATCH / MULTI / EXEC).
 * WATCH belongs to a connection, so the store owns a dedicated one and runs one write at a time.
 * A decision that leaves the value as it is writes nothing, so it needs no transaction: it is
 * answered from one GET, outside the queue of writes (see `update`).
 */
export class CasStore {
  private chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly redis: Redis) {}

  async read<S>(key: string): Promise<S | undefined> {
    const raw = await this.redis.get(key);
    return raw === null ? undefined : (JSON.parse(raw) as S);
  }

  /**
   * `fn` gets the current value (undefined when absent) and returns the next value and a result;
   * it must be pure, as it may run more than once.
   *
   * `fn` first sees a plain GET's value. If its next value is that value (as JSON), that answer
   * stands: a GET is atomic, and nothing is written. Only a change goes through the transaction,
   * where `fn` decides again on the WATCHed value. The common decision (a closed breaker asked
   * whether a slot may create) thus costs one round trip, not three, and a lane's slots asking at
   * once (a burst) do not queue behind each other's WATCH / MULTI / EXEC.
   */
  async update<S, T>(key: string, fn: (current: S | undefined) => { next: S; result: T }): Promise<T> {
    const raw = await this.redis.get(key);
    if (raw !== null) {
      const current = JSON.parse(raw) as S;
      const { next, result } = fn(current);
      if (unchanged(next, current)) return result;
    }
    const run = this.chain.then(() => this.attempt(key, fn));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async attempt<S, T>(key: string, fn: (current: S | undefined) => { next: S; result: T }): Promise<T> {
    for (let i = 0; i < CAS_MAX_ATTEMPTS; i++) {
      await this.redis.watch(key);
      const raw = await this.redis.get(key);
      const { next, result } = fn(raw === null ? undefined : (JSON.parse(raw) as S));
      const committed = await this.redis.multi().set(key, JSON.stringify(next)).exec();
      if (committed !== null) return result; // null: another process wrote first, so read again
      await new Promise((r) => setTimeout(r, Math.random() * CAS_RETRY_JITTER_MS));
    }
    throw new Error(`${key}: gave up after ${CAS_MAX_ATTEMPTS} conflicting updates`);
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/** `next` as it would be stored (JSON drops undefined fields) is `current`, whatever the key order. */
function unchanged(next: unknown, current: unknown): boolean {
  return isDeepStrictEqual(JSON.parse(JSON.stringify(next) ?? 'null'), current);
}
