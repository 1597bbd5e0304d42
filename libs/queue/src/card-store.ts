import type { Redis } from 'ioredis';
import {
  CardSchema,
  HistoryEntrySchema,
  type BlockedReason,
  type Card,
  type CardRecord,
  type CardState,
  type EventType,
  type FailedReason,
  type HistoryEntry,
  type ObservedExitCode,
  type Verdict,
} from '@lanes/contracts';
import type { EventLog } from './event-log.js';
import { keys } from './names.js';

export interface Transition {
  state: CardState;
  attempt: number;
  sandboxId?: string;
  blockedReason?: BlockedReason;
  failedReason?: FailedReason;
  verdict?: Verdict;
  observedExitCode?: ObservedExitCode;
  exitCode?: number;
  message?: string;
  retryAt?: number;
  result?: unknown;
  /** New infra-retry count, when this transition spends one. */
  infraRetries?: number;
  /** Event to emit; defaults to `card.<state>`. */
  event?: EventType;
  slot?: string;
}

export interface CardStoreDeps {
  redis: Redis;
  events: EventLog;
  now: () => number;
}

type Hash = Record<string, string>;

/** Card state, attempts, history and result in Redis. Every transition is one MULTI. */
export class CardStore {
  constructor(private readonly deps: CardStoreDeps) {}

  /** Creates the record unless the id exists. Returns whether it was new, and the record. */
  async create(card: Card): Promise<{ created: boolean; record: CardRecord }> {
    const { redis, now } = this.deps;
    const at = new Date(now()).toISOString();
    const key = keys.card(card.id);
    const created = (await redis.hsetnx(key, 'card', JSON.stringify(card))) === 1;
    if (created) {
      const entry: HistoryEntry = { at, state: 'queued', attempt: 0, message: 'enqueued' };
      const multi = redis.multi();
      multi.hset(key, { lane: card.lane, state: 'queued', attempts: '0', infraRetries: '0', createdAt: at, updatedAt: at });
      multi.rpush(keys.history(card.id), JSON.stringify(entry));
      this.deps.events.appendTo(multi, { type: 'card.queued', at, lane: card.lane, cardId: card.id });
      await multi.exec();
    }
    const record = await this.get(card.id);
    if (!record) throw new Error(`card ${card.id} vanished while being created`);
    return { created, record };
  }

  async get(id: string): Promise<CardRecord | undefined> {
    const [hash, history] = await Promise.all([
      this.deps.redis.hgetall(keys.card(id)),
      this.deps.redis.lrange(keys.history(id), 0, -1),
    ]);
    if (!hash.card) return undefined;
    return toRecord(hash, history);
  }

  /** The lane an existing card belongs to; one field, for checks that need nothing else. */
  async lane(id: string): Promise<string | undefined> {
    return (await this.deps.redis.hget(keys.card(id), 'lane')) ?? undefined;
  }

  /** Appends one history entry and moves the card's current fields with it, atomically. */
  async transition(card: Pick<Card, 'id' | 'lane'>, t: Transition): Promise<void> {
    const { redis, now } = this.deps;
    const at = new Date(now()).toISOString();
    const entry: HistoryEntry = HistoryEntrySchema.parse({
      at,
      state: t.state,
      attempt: t.attempt,
      sandboxId: t.sandboxId,
      blockedReason: t.blockedReason,
      failedReason: t.failedReason,
      verdict: t.verdict,
      observedExitCode: t.observedExitCode,
      exitCode: t.exitCode,
      message: t.message,
      retryAt: t.retryAt === undefined ? undefined : new Date(t.retryAt).toISOString(),
    });
    const key = keys.card(card.id);
    const set: Hash = { state: t.state, updatedAt: at, attempts: String(t.attempt) };
    if (t.sandboxId !== undefined) set.sandboxId = t.sandboxId;
    if (t.observedExitCode !== undefined) set.observedExitCode = JSON.stringify(t.observedExitCode);
    if (t.infraRetries !== undefined) set.infraRetries = String(t.infraRetries);
    if (t.result !== undefined) set.result = JSON.stringify(t.result);
    if (t.failedReason !== undefined) set.failedReason = t.failedReason;
    if (t.blockedReason !== undefined) {
      set.blockedReason = t.blockedReason;
      set.blockedMessage = t.message ?? '';
    }
    const multi = redis.multi();
    multi.hset(key, set);
    if (t.state !== 'blocked') multi.hdel(key, 'blockedReason', 'blockedMessage');
    multi.rpush(keys.history(card.id), JSON.stringify(entry));
    if (t.state === 'blocked') multi.zadd(keys.blocked(card.lane), now(), card.id);
    else multi.zrem(keys.blocked(card.lane), card.id);
    this.deps.events.appendTo(multi, {
      type: t.event ?? (`card.${t.state}` as EventType),
      at,
      lane: card.lane,
      cardId: card.id,
      slot: t.slot,
      sandboxId: t.sandboxId,
      data: compact({
        blockedReason: t.blockedReason,
        failedReason: t.failedReason,
        verdict: t.verdict,
        observedExitCode: t.observedExitCode,
        message: t.message,
      }),
    });
    await multi.exec();
  }

  /** Blocked cards of a lane, oldest first, with why they wait (one round trip for the reasons). */
  async blocked(lane: string): Promise<Array<{ id: string; blockedReason: BlockedReason; since: number }>> {
    const flat = await this.deps.redis.zrange(keys.blocked(lane), 0, -1, 'WITHSCORES');
    const entries: Array<{ id: string; since: number }> = [];
    for (let i = 0; i < flat.length; i += 2) entries.push({ id: flat[i]!, since: Number(flat[i + 1]) });
    if (entries.length === 0) return [];
    const pipeline = this.deps.redis.pipeline();
    for (const e of entries) pipeline.hget(keys.card(e.id), 'blockedReason');
    const reasons = (await pipeline.exec()) ?? [];
    const out: Array<{ id: string; blockedReason: BlockedReason; since: number }> = [];
    entries.forEach((e, i) => {
      const reason = reasons[i]?.[1] as BlockedReason | null | undefined;
      if (reason) out.push({ ...e, blockedReason: reason });
    });
    return out;
  }
}

function compact(o: Record<string, string | number | undefined>): Record<string, string | number> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Record<string, string | number>;
}

function toRecord(hash: Hash, history: string[]): CardRecord {
  const card = CardSchema.parse(JSON.parse(hash.card!));
  const record: CardRecord = {
    ...card,
    state: (hash.state ?? 'queued') as CardState,
    attempts: Number(hash.attempts ?? 0),
    infraRetries: Number(hash.infraRetries ?? 0),
    createdAt: hash.createdAt ?? '',
    updatedAt: hash.updatedAt ?? '',
    history: history.map((h) => HistoryEntrySchema.parse(JSON.parse(h))),
  };
  if (hash.blockedReason) record.blockedReason = hash.blockedReason as BlockedReason;
  if (hash.blockedMessage) record.blockedMessage = hash.blockedMessage;
  if (hash.failedReason && record.state === 'failed') record.failedReason = hash.failedReason as FailedReason;
  if (hash.sandboxId) record.sandboxId = hash.sandboxId;
  if (hash.observedExitCode) record.observedExitCode = JSON.parse(hash.observedExitCode) as ObservedExitCode;
  if (hash.result) record.result = JSON.parse(hash.result) as CardRecord['result'];
  return record;
}
