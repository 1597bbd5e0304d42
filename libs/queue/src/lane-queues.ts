import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { isTerminalCardState, type Card, type CardState, type LaneConfig } from '@lanes/contracts';
import type { CardStore } from './card-store.js';
import { jobOptions } from './job-options.js';
import { QUEUE_PREFIX, keys, queueName } from './names.js';

/** A worker moves a blocked card's job to delayed within milliseconds of recording it blocked. */
export const REDRIVE_HANDOVER_MS = 2_000;
const REDRIVE_HANDOVER_POLL_MS = 25;

export interface LaneQueuesDeps {
  redis: Redis;
  store: CardStore;
  lanes: readonly LaneConfig[];
  /** Connection errors of the queues (Redis down, reconnecting); they recover by themselves. */
  onError?: (err: Error) => void;
}

export type EnqueueOutcome = { created: true; id: string; state: CardState } | { created: false; id: string; state: CardState };

/** A batch is enqueued whole, or refused whole when an id already belongs to a card on another lane. */
export type EnqueueManyResult = { ok: true; results: EnqueueOutcome[] } | { ok: false; conflicts: Array<{ index: number; id: string; lane: string }> };

export type CommandOutcome = { ok: true; state: CardState } | { ok: false; code: 'CARD_NOT_FOUND' | 'CARD_STATE'; state?: CardState; message: string };

/** One BullMQ queue per lane, and the card operations that touch both the queue and the store. */
export class LaneQueues {
  private readonly queues = new Map<string, Queue>();
  private readonly lanes = new Map<string, LaneConfig>();

  constructor(private readonly deps: LaneQueuesDeps) {
    for (const lane of deps.lanes) {
      this.lanes.set(lane.name, lane);
      const queue = new Queue(queueName(lane.name), { connection: deps.redis, prefix: QUEUE_PREFIX });
      queue.on('error', deps.onError ?? (() => undefined));
      this.queues.set(lane.name, queue);
    }
  }

  lane(name: string): LaneConfig | undefined {
    return this.lanes.get(name);
  }

  queue(lane: string): Queue | undefined {
    return this.queues.get(lane);
  }

  all(): Queue[] {
    return [...this.queues.values()];
  }

  /**
   * Idempotent: the store record is the authority, so re-posting an id never runs it twice,
   * even after BullMQ has removed the finished job. A record left queued without a job
   * (a crash between the two writes) is repaired by re-adding the job.
   */
  async enqueue(card: Card): Promise<EnqueueOutcome> {
    const out = await this.enqueueMany([card]);
    if (!out.ok) throw new Error(`card ${card.id} already exists on lane "${out.conflicts[0]?.lane}"`);
    return out.results[0]!;
  }

  /**
   * Enqueues validated cards with one pipeline of record writes and one `addBulk` per lane, as
   * `enqueue` would one by one. A batch of several is first checked for ids already on another
   * lane (one more pipeline) so that it is refused whole; for one card the create itself tells.
   */
  async enqueueMany(cards: readonly Card[]): Promise<EnqueueManyResult> {
    for (const card of cards) if (!this.lanes.has(card.lane)) throw new Error(`unknown lane ${card.lane}`);
    if (cards.length > 1) {
      const pipeline = this.deps.redis.pipeline();
      for (const card of cards) pipeline.hget(keys.card(card.id), 'lane');
      const lanes = (await pipeline.exec()) ?? [];
      const conflicts = cards.flatMap((card, index) => {
        const lane = lanes[index]?.[1];
        return typeof lane === 'string' && lane !== card.lane ? [{ index, id: card.id, lane }] : [];
      });
      if (conflicts.length) return { ok: false, conflicts };
    }
    const created = await this.deps.store.createMany(cards);
    const conflicts = created.flatMap((c, index) => (!c.created && c.lane !== cards[index]!.lane ? [{ index, id: cards[index]!.id, lane: c.lane }] : []));
    if (conflicts.length) return { ok: false, conflicts };
    // A queued record whose job is gone (a crash between the two writes) gets its job again.
    const repeats = cards.filter((_, i) => !created[i]!.created && created[i]!.state === 'queued');
    const missing = new Set(
      (await Promise.all(repeats.map(async (card) => ((await this.queues.get(card.lane)!.getJob(card.id)) ? undefined : card.id)))).filter((id): id is string => id !== undefined),
    );
    const byLane = new Map<string, Card[]>();
    cards.forEach((card, i) => {
      if (created[i]!.created || missing.has(card.id)) byLane.set(card.lane, [...(byLane.get(card.lane) ?? []), card]);
    });
    await Promise.all(
      [...byLane].map(([lane, batch]) => {
        const queue = this.queues.get(lane)!;
        const config = this.lanes.get(lane)!;
        // One job: `add` skips the MULTI that addBulk wraps around its jobs.
        if (batch.length === 1) return queue.add(lane, batch[0]!, jobOptions(batch[0]!, config));
        return queue.addBulk(batch.map((card) => ({ name: lane, data: card, opts: jobOptions(card, config) })));
      }),
    );
    return {
      ok: true,
      results: cards.map((card, i) => {
        const c = created[i]!;
        return (c.created ? { created: true, id: card.id, state: 'queued' } : { created: false, id: card.id, state: c.state }) satisfies EnqueueOutcome;
      }),
    };
  }

  async job(cardId: string, lane: string): Promise<Job | undefined> {
    return (await this.queues.get(lane)?.getJob(cardId)) ?? undefined;
  }

  /** Queued or blocked cards are removed from the queue; a running card is told to stop through pub/sub. */
  async cancel(cardId: string): Promise<CommandOutcome> {
    const record = await this.deps.store.get(cardId);
    if (!record) return { ok: false, code: 'CARD_NOT_FOUND', message: `no card ${cardId}` };
    if (isTerminalCardState(record.state)) {
      return { ok: false, code: 'CARD_STATE', state: record.state, message: `card ${cardId} is already ${record.state}` };
    }
    const job = await this.job(cardId, record.lane);
    const jobState = job ? await job.getState() : 'unknown';
    // Read before the removal: a card left running by a crashed run may be cancelled only while that run is still its run.
    const runToken = record.state === 'running' ? await this.deps.store.runToken(cardId) : undefined;
    if (job && jobState !== 'active') {
      const removed = await job.remove().then(
        () => true,
        () => false,
      );
      if (removed) {
        const moved = await this.deps.store.transition(
          record,
          { to: 'cancelled', attempt: record.attempts, message: 'cancelled before it ran' },
          runToken === undefined ? { kind: 'board' } : { kind: 'board-if-run', token: runToken },
        );
        if (moved.ok) return { ok: true, state: 'cancelled' };
        const now = await this.deps.store.get(cardId);
        return { ok: false, code: 'CARD_STATE', ...(now ? { state: now.state } : {}), message: `card ${cardId} moved on while being cancelled` };
      }
    }
    // Running (or just became active): the slot that holds it kills its process group and records the cancel.
    await this.deps.redis.publish(keys.cancelChannel(), cardId);
    return { ok: true, state: record.state };
  }

  /** A needs-human card goes back to the queue; its attempts are untouched. */
  async unblock(cardId: string, note?: string): Promise<CommandOutcome> {
    const record = await this.deps.store.get(cardId);
    if (!record) return { ok: false, code: 'CARD_NOT_FOUND', message: `no card ${cardId}` };
    if (record.state !== 'blocked') {
      return { ok: false, code: 'CARD_STATE', state: record.state, message: `card ${cardId} is ${record.state}, not blocked` };
    }
    if (!(await this.redrive(record, 'card.unblocked', note ? `unblocked: ${note}` : 'unblocked'))) {
      // Its job is not delayed (still active, or gone): saying "queued" would leave it blocked unseen.
      return { ok: false, code: 'CARD_STATE', state: 'blocked', message: `card ${cardId} is blocked but its job could not be re-queued; try again` };
    }
    return { ok: true, state: 'queued' };
  }

  /**
   * Moves a blocked (delayed) card back to waiting now. Safe to call twice. A worker records
   * `blocked` just before it moves the job to delayed, so a job still active is given a moment
   * (REDRIVE_HANDOVER_MS) to finish that hand-over.
   */
  async redrive(card: Pick<Card, 'id' | 'lane'> & { attempts: number }, event: 'card.redriven' | 'card.unblocked', message: string): Promise<boolean> {
    const job = await this.job(card.id, card.lane);
    if (!job) return false;
    const deadline = Date.now() + REDRIVE_HANDOVER_MS;
    let state = await job.getState();
    while (state === 'active' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, REDRIVE_HANDOVER_POLL_MS));
      state = await job.getState();
    }
    if (state !== 'delayed') return false;
    const promoted = await job.promote().then(
      () => true,
      () => false,
    );
    if (!promoted) return false;
    const moved = await this.deps.store.transition(card, { to: 'queued', attempt: card.attempts, event, message }, { kind: 'board' });
    // A run may already have taken the promoted job: the card is its now, and this write was refused.
    return moved.ok || moved.state === 'running';
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((q) => q.close()));
  }
}
