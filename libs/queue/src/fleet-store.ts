import type { Redis, Result } from 'ioredis';
import {
  LaneIsolationSchema,
  LivenessVerdictSchema,
  SandboxRecordSchema,
  type BreakerStateName,
  type LaneIsolation,
  type LivenessVerdict,
  type SandboxRecord,
  type SlotStatus,
} from '@lanes/contracts';
import { keys } from './names.js';
import { defineScriptsOnce } from './redis-scripts.js';

/** Sandbox records outlive their sandbox for a week, so a death can be diagnosed afterwards. */
export const SANDBOX_RECORD_TTL_S = 7 * 24 * 3600;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesSandboxMerge(key: string, fields: string, ttlS: number): Result<number, Context>;
  }
}

/**
 * KEYS[1] a sandbox's record (JSON), ARGV[1] the fields to merge in (a JSON object), ARGV[2] its TTL
 * in seconds. Read and write in one step: a worker sends its records without waiting for the last
 * (a death's details, then the replacement; both queue up while Redis is away), and a merge read
 * before the other's write landed would drop that write's fields. An unreadable record is replaced.
 */
const MERGE_LUA = `
local merged = cjson.decode(ARGV[1])
local raw = redis.call('GET', KEYS[1])
if raw then
  local ok, previous = pcall(cjson.decode, raw)
  if ok and type(previous) == 'table' then
    for k, v in pairs(merged) do previous[k] = v end
    merged = previous
  end
end
redis.call('SET', KEYS[1], cjson.encode(merged), 'EX', ARGV[2])
return 1
`;
const SCRIPTS = { lanesSandboxMerge: { numberOfKeys: 1, lua: MERGE_LUA } };

export interface LaneHealth {
  status: 'healthy' | 'degraded' | 'outage';
  reason: string;
  at: string;
}

export interface BreakerStatus {
  state: BreakerStateName;
  failures: number;
  retryAt?: string;
}

/** What workers publish about themselves (heartbeats, slots, breakers) and the supervisor and API read. */
export class FleetStore {
  constructor(private readonly redis: Redis) {
    defineScriptsOnce(redis, SCRIPTS);
  }

  /** Publishes the worker's beat sequence: a counter it advances each beat, never a timestamp. */
  async beat(workerId: string, seq: number): Promise<void> {
    await this.redis.hset(keys.workerBeats(), workerId, String(seq));
  }

  async forgetWorker(workerId: string): Promise<void> {
    await this.redis.hdel(keys.workerBeats(), workerId);
  }

  /** The last beat sequence of every worker that ever beat and was not forgotten. */
  async beats(): Promise<Record<string, number>> {
    return (await this.readBeats()).beats;
  }

  /**
   * The beats together with the run id of the Redis that answered (read in one transaction):
   * a different run id means Redis restarted or failed over in between, which the supervisor's
   * liveness tracking must not mistake for workers falling silent.
   */
  async readBeats(): Promise<{ beats: Record<string, number>; redisRunId?: string }> {
    const replies = await this.redis.multi().hgetall(keys.workerBeats()).info('server').exec();
    const [[beatsErr, flat], [infoErr, info]] = replies as [[Error | null, Record<string, string>], [Error | null, string]];
    if (beatsErr) throw beatsErr;
    const beats = Object.fromEntries(Object.entries(flat).map(([w, seq]) => [w, Number(seq)]));
    const runId = infoErr ? undefined : /^run_id:(\S+)/m.exec(info)?.[1];
    return { beats, ...(runId ? { redisRunId: runId } : {}) };
  }

  /**
   * The supervisor's liveness verdicts, replaced as a whole each sweep. They expire after `ttlMs`
   * (Redis keeps the expiry, no host compares clocks), so verdicts of a supervisor that stopped
   * sweeping vanish and read as unknown.
   */
  async putLiveness(verdicts: readonly LivenessVerdict[], ttlMs: number): Promise<void> {
    const tx = this.redis.multi().del(keys.liveness());
    if (verdicts.length > 0) {
      tx.hset(keys.liveness(), Object.fromEntries(verdicts.map((v) => [v.worker, JSON.stringify(v)])));
      tx.pexpire(keys.liveness(), ttlMs);
    }
    await tx.exec();
  }

  /** Published verdicts by worker; a worker with none is unknown, never gone. */
  async liveness(): Promise<Record<string, LivenessVerdict>> {
    const raw = await this.redis.hgetall(keys.liveness());
    const out: Record<string, LivenessVerdict> = {};
    for (const [worker, json] of Object.entries(raw)) {
      const parsed = LivenessVerdictSchema.safeParse(safeJson(json));
      if (parsed.success) out[worker] = parsed.data;
    }
    return out;
  }

  async registerLanes(lanes: Array<{ name: string; provider: string; isolation?: LaneIsolation }>): Promise<void> {
    if (lanes.length === 0) return;
    const isolations = lanes.filter((l) => l.isolation).map((l) => [l.name, JSON.stringify(l.isolation)]);
    const pipeline = this.redis.multi().hset(keys.lanes(), Object.fromEntries(lanes.map((l) => [l.name, l.provider])));
    if (isolations.length > 0) pipeline.hset(keys.laneIsolation(), Object.fromEntries(isolations));
    await pipeline.exec();
  }

  /** Each lane's isolation as its workers last reported it at boot. Unreadable entries are left out. */
  async isolations(): Promise<Record<string, LaneIsolation>> {
    const raw = await this.redis.hgetall(keys.laneIsolation());
    const out: Record<string, LaneIsolation> = {};
    for (const [lane, json] of Object.entries(raw)) {
      const parsed = LaneIsolationSchema.safeParse(safeJson(json));
      if (parsed.success) out[lane] = parsed.data;
    }
    return out;
  }

  async lanes(): Promise<Record<string, string>> {
    return this.redis.hgetall(keys.lanes());
  }

  async putSlot(lane: string, status: SlotStatus): Promise<void> {
    await this.redis.hset(keys.slots(lane), `${status.worker}/${status.slot}`, JSON.stringify(status));
  }

  async removeSlots(lane: string, workerId: string): Promise<void> {
    const fields = await this.redis.hkeys(keys.slots(lane));
    const mine = fields.filter((f) => f.startsWith(`${workerId}/`));
    if (mine.length) await this.redis.hdel(keys.slots(lane), ...mine);
  }

  /** One slot a worker scaled away: it leaves `GET /v1/lanes` at once. */
  async removeSlot(lane: string, workerId: string, slotId: string): Promise<void> {
    await this.redis.hdel(keys.slots(lane), `${workerId}/${slotId}`);
  }

  async slots(lane: string): Promise<SlotStatus[]> {
    const all = await this.redis.hgetall(keys.slots(lane));
    return Object.values(all)
      .map((v) => JSON.parse(v) as SlotStatus)
      .sort(byWorkerThenSlot);
  }

  /** The lane's shared breaker, as operators read it (workers keep the snapshot through CasStore). */
  async breaker(lane: string): Promise<BreakerStatus> {
    const raw = await this.redis.get(keys.breaker(lane));
    if (!raw) return { state: 'closed', failures: 0 };
    const s = JSON.parse(raw) as { state: BreakerStateName; failures: number[]; retryAt?: number };
    return { state: s.state, failures: s.failures.length, ...(s.retryAt !== undefined && s.state !== 'closed' ? { retryAt: new Date(s.retryAt).toISOString() } : {}) };
  }

  async putHealth(lane: string, health: LaneHealth): Promise<void> {
    await this.redis.set(keys.health(lane), JSON.stringify(health));
  }

  async health(lane: string): Promise<LaneHealth | undefined> {
    const raw = await this.redis.get(keys.health(lane));
    return raw ? (JSON.parse(raw) as LaneHealth) : undefined;
  }

  /** Merges fields into the sandbox's record (created, live, dead with its observed exit code). */
  async putSandbox(record: SandboxRecord): Promise<void> {
    await this.redis.lanesSandboxMerge(keys.sandbox(record.id), JSON.stringify(record), SANDBOX_RECORD_TTL_S);
  }

  /** The owners lanes recorded for these sandboxes (one round trip); ids it has no record of are absent. */
  async sandboxOwners(ids: readonly string[]): Promise<Record<string, { worker: string; lane: string; slot: string }>> {
    if (ids.length === 0) return {};
    const raws = await this.redis.mget(...ids.map((id) => keys.sandbox(id)));
    const owners: Record<string, { worker: string; lane: string; slot: string }> = {};
    ids.forEach((id, i) => {
      const parsed = SandboxRecordSchema.pick({ worker: true, lane: true, slot: true }).safeParse(safeJson(raws[i] ?? 'null'));
      if (parsed.success) owners[id] = parsed.data;
    });
    return owners;
  }

  /** The record lanes keeps of a sandbox; undefined when there is none or it cannot be read. */
  async sandbox(id: string): Promise<SandboxRecord | undefined> {
    const raw = await this.redis.get(keys.sandbox(id));
    const parsed = raw === null ? undefined : SandboxRecordSchema.safeParse(safeJson(raw));
    return parsed?.success ? parsed.data : undefined;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const codeUnitOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * By worker, then slot, in code-unit order: the same on every host. `localeCompare` was the ICU
 * collator's, whose first use in a process blocks its event loop for 15–60 ms, and a lane's first
 * sort of more than one slot falls in a burst, while its sandboxes start (bench/README.md, burst).
 */
function byWorkerThenSlot(a: SlotStatus, b: SlotStatus): number {
  return codeUnitOrder(a.worker, b.worker) || codeUnitOrder(a.slot, b.slot);
}
