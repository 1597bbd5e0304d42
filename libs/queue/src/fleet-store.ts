import type { Redis } from 'ioredis';
import type { BreakerStateName, SandboxRecord, SlotStatus } from '@lanes/contracts';
import { keys } from './names.js';

/** Sandbox records outlive their sandbox for a week, so a death can be diagnosed afterwards. */
export const SANDBOX_RECORD_TTL_S = 7 * 24 * 3600;

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
  constructor(private readonly redis: Redis) {}

  async beat(workerId: string, atMs: number): Promise<void> {
    await this.redis.zadd(keys.workers(), atMs, workerId);
  }

  async forgetWorker(workerId: string): Promise<void> {
    await this.redis.zrem(keys.workers(), workerId);
  }

  /** Last heartbeat of every worker that ever beat and was not forgotten. */
  async heartbeats(): Promise<Record<string, number>> {
    const flat = await this.redis.zrange(keys.workers(), 0, -1, 'WITHSCORES');
    const out: Record<string, number> = {};
    for (let i = 0; i < flat.length; i += 2) out[flat[i]!] = Number(flat[i + 1]);
    return out;
  }

  async registerLanes(lanes: Array<{ name: string; provider: string }>): Promise<void> {
    if (lanes.length === 0) return;
    await this.redis.hset(keys.lanes(), Object.fromEntries(lanes.map((l) => [l.name, l.provider])));
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

  async slots(lane: string): Promise<SlotStatus[]> {
    const all = await this.redis.hgetall(keys.slots(lane));
    return Object.values(all)
      .map((v) => JSON.parse(v) as SlotStatus)
      .sort((a, b) => (a.worker + a.slot).localeCompare(b.worker + b.slot));
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
    const key = keys.sandbox(record.id);
    const previous = await this.sandbox(record.id);
    await this.redis.set(key, JSON.stringify({ ...previous, ...record }), 'EX', SANDBOX_RECORD_TTL_S);
  }

  async sandbox(id: string): Promise<SandboxRecord | undefined> {
    const raw = await this.redis.get(keys.sandbox(id));
    return raw ? (JSON.parse(raw) as SandboxRecord) : undefined;
  }
}
