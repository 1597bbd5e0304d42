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

export type CommandOutcome = { ok: true; state: CardState } | { ok: false; code: 'CARD_NOT_FOUND' | 'CARD_STATE'; state?: CardState; message: string };

/** One BullMQ queue per lane, and the card operations that touch both the queue and the store. */
export class LaneQueues {
  private readonly queues = new Map<string, Queue>();

  constructor(private readonly deps: LaneQueuesDeps) {
    for (const lane of deps.lanes) {
      const queue = new Queue(queueName(lane.name), { connection: deps.redis, prefix: QUEUE_PREFIX });
      queue.on('error', deps.onError ?? (() => undefined));
      this.queues.set(lane.name, queue);
    }
  }

  lane(name: string): LaneConfig | undefined {
    return this.deps.lanes.find((l) => l.name === name);
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
    const lane = this.lane(card.lane);
    const queue = this.queues.get(card.lane);
    if (!lane || !queue) throw new Error(`unknown lane ${card.lane}`);
    const { created, record } = await this.deps.store.create(card);
    if (created || (record.state === 'queued' && !(await queue.getJob(card.id)))) {
      await queue.add(card.lane, card, jobOptions(card, lane));
    }
    return { created, id: card.id, state: created ? 'queued' : record.state } as EnqueueOutcome;
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
