import { Job, Queue } from 'bullmq';
import type { Redis, Result } from 'ioredis';
import { bullmqTelemetry } from '@lanes/tracing';
import {
  CardSchema,
  DEFAULT_SUPERSEDE_MODE,
  defaults,
  isRetryableCardState,
  supersededReason,
  isTerminalCardState,
  type BlockedReason,
  type Card,
  type CardState,
  type LaneConfig,
  type LaneOpenCards,
} from '@lanes/contracts';
import type { CardStore } from './card-store.js';
import { callbackBacklog, callbacksOwed } from './callback-stream.js';
import { ENQUEUE_RELEASE_SCRIPT, ENQUEUE_SCRIPT, defineEnqueueScripts, enqueueArgs, parseEnqueueReply, type EnqueueReply } from './enqueue-script.js';
import { EVENT_STREAM_MAX_LEN } from './event-log.js';
import { jobOptions } from './job-options.js';
import { withTraceMetadata, withTraceOption } from './job-trace.js';
import { JOB_LAYOUT_WRITABLE, WAIT_FRONT_LUA, jobLayoutOpts } from './bullmq-job-layout.js';
import { QUEUE_PREFIX, keys, queueName } from './names.js';
import { describeLaneFull, laneFullFor, readOpenCards, type LaneFull, type OpenBounds } from './open-cards.js';
import { defineScriptsOnce } from './redis-scripts.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesWaitFront(waitKey: string, jobId: string): Result<number, Context>;
  }
}

const SCRIPTS = { lanesWaitFront: { numberOfKeys: 1, lua: WAIT_FRONT_LUA } };

/** A worker moves a blocked card's job to delayed within milliseconds of recording it blocked. */
export const REDRIVE_HANDOVER_MS = 2_000;
const REDRIVE_HANDOVER_POLL_MS = 25;

export interface LaneQueuesDeps {
  redis: Redis;
  store: CardStore;
  lanes: readonly LaneConfig[];
  /** Connection errors of the queues (Redis down, reconnecting); they recover by themselves. */
  onError?: (err: Error) => void;
  /** The clock of the records an enqueue writes; Date.now unless given. */
  now?: () => number;
  /**
   * Whether an enqueue writes each card's BullMQ job itself (bullmq-job-layout.ts) or hands it to
   * BullMQ's add. Unless given: itself, under the BullMQ version whose layout it was checked against.
   */
  writeJobs?: boolean;
  /** Callback stream length at which an enqueue of a card with a callbackUrl is refused (DEFAULT_CALLBACK_BACKLOG_MAX). */
  callbackBacklogMax?: number;
  /** Callbacks one lane may owe at which its enqueues of cards with a callbackUrl are refused (DEFAULT_LANE_CALLBACK_BACKLOG_MAX). */
  laneCallbackBacklogMax?: number;
}

export type EnqueueOutcome = { created: true; id: string; state: CardState } | { created: false; id: string; state: CardState };

/**
 * A batch is enqueued whole, or refused whole when an id already belongs to a card on another
 * lane, when a card of it has a callbackUrl and the callback backlog (the stream's, or its lane's
 * share) is at its bound, or when its new cards would take a lane past its `maxOpenCards` or their
 * JSON past its `maxOpenBytes`.
 */
export type EnqueueManyResult =
  | { ok: true; results: EnqueueOutcome[] }
  | { ok: false; conflicts: Array<{ index: number; id: string; lane: string }> }
  | { ok: false; callbackBacklog: CallbackBacklog }
  | { ok: false; laneFull: LaneFull };

/** A blocked card as CardStore.blocked lists it. */
export type BlockedEntry = { id: string; blockedReason: BlockedReason; since: number };

/** What a re-drive policy picked (selectRedrive's decision). */
export type RedriveSelection = { action: 'redrive'; ids: readonly string[]; reason: string } | { action: 'none'; reason: string };

/** Callback entries waiting for delivery, and the bound at which cards with a callbackUrl are refused. */
export interface CallbackBacklog {
  length: number;
  max: number;
  /** The lane whose own owed callbacks (`length`) are at its bound (`max`); absent: the whole stream is at its bound. */
  lane?: string;
}

export type CommandOutcome =
  | { ok: true; state: CardState }
  | {
      ok: false;
      /**
       * CARD_STATE: not a state the command applies to; CARD_BUSY: a run is still ending the card's
       * job, ask again shortly; LANE_FULL: a retry would take its lane past its maxOpenCards or maxOpenBytes.
       */
      code: 'CARD_NOT_FOUND' | 'CARD_STATE' | 'CARD_BUSY' | 'LANE_FULL';
      state?: CardState;
      message: string;
    };

export interface CancelOptions {
  /** Said by the cancelled move instead of a plain cancel's words, e.g. `superseded by <id>`. */
  reason?: string;
  /** false: a card a run holds (running, or its job taken) is left to run, answered CARD_BUSY. */
  running?: boolean;
}

/** The ids of a refused batch that belong to another lane (or appear twice on two lanes). */
function conflictsOf(cards: readonly Card[], reply: EnqueueReply): Array<{ index: number; id: string; lane: string }> {
  const seen = new Map<string, string>();
  return cards.flatMap((card, index) => {
    const lane = reply.before[index]?.lane ?? seen.get(card.id);
    if (!seen.has(card.id)) seen.set(card.id, card.lane);
    return lane !== undefined && lane !== card.lane ? [{ index, id: card.id, lane }] : [];
  });
}

/** One BullMQ queue per lane, and the card operations that touch both the queue and the store. */
export class LaneQueues {
  private readonly queues = new Map<string, Queue>();
  private readonly lanes = new Map<string, LaneConfig>();

  private readonly now: () => number;
  private readonly writeJobs: boolean;
  readonly callbackBacklogMax: number;
  readonly laneCallbackBacklogMax: number;
  private readonly openCardsMax = new Map<string, OpenBounds>();

  constructor(private readonly deps: LaneQueuesDeps) {
    this.now = deps.now ?? Date.now;
    this.writeJobs = deps.writeJobs ?? JOB_LAYOUT_WRITABLE;
    this.callbackBacklogMax = deps.callbackBacklogMax ?? defaults.DEFAULT_CALLBACK_BACKLOG_MAX;
    this.laneCallbackBacklogMax = deps.laneCallbackBacklogMax ?? defaults.DEFAULT_LANE_CALLBACK_BACKLOG_MAX;
    defineEnqueueScripts(deps.redis);
    defineScriptsOnce(deps.redis, SCRIPTS);
    for (const lane of deps.lanes) {
      this.lanes.set(lane.name, lane);
      this.openCardsMax.set(lane.name, { cards: lane.maxOpenCards, bytes: lane.maxOpenBytes });
      // With tracing on, BullMQ's own add carries the caller's trace to the job (job-trace.ts).
      const queue = new Queue(queueName(lane.name), { connection: deps.redis, prefix: QUEUE_PREFIX, ...bullmqTelemetry() });
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
    if (!out.ok && 'callbackBacklog' in out) throw new Error(`card ${card.id} refused: ${out.callbackBacklog.length} callbacks wait for delivery`);
    if (!out.ok && 'laneFull' in out) throw new Error(`card ${card.id} refused: ${describeLaneFull(out.laneFull)}`);
    if (!out.ok) throw new Error(`card ${card.id} already exists on lane "${out.conflicts[0]?.lane}"`);
    return out.results[0]!;
  }

  /**
   * Enqueues validated cards, records and jobs atomically (see enqueue-script.ts), in one round
   * trip: the record script writes each card's job itself (bullmq-job-layout.ts). Where it does not
   * (`writeJobs` false), several cards go in one MULTI: the record script, BullMQ's add of each
   * job, the release of the guards that keep an add out where the card must get no job; and one
   * card in two plain commands (`enqueueOne`): on ioredis a MULTI costs more CPU than the round
   * trip it saves (the pipeline object, its promises; bench/README.md). A batch with an id already
   * on another lane is refused whole, with nothing written.
   */
  async enqueueMany(cards: readonly Card[]): Promise<EnqueueManyResult> {
    for (const card of cards) {
      if (!this.lanes.has(card.lane)) throw new Error(`unknown lane ${card.lane}`);
      // BullMQ's own refusal (Queue.add), made before anything is written.
      if (card.id === '0' || card.id.startsWith('0:')) throw new Error("JobId cannot be '0' or start with '0:'");
    }
    if (cards.length === 0) return { ok: true, results: [] };
    if (!this.writeJobs && cards.length === 1) return this.enqueueOne(cards[0]!);
    const jobOpts = this.writeJobs ? cards.map((card) => withTraceMetadata(jobLayoutOpts(card, this.lanes.get(card.lane)!))) : [];
    const args = enqueueArgs(cards, this.now(), EVENT_STREAM_MAX_LEN, 'enqueue', jobOpts, this.callbackBacklogMax, this.openCardsMax, this.laneCallbackBacklogMax);
    const reply = parseEnqueueReply(this.writeJobs ? await this.deps.redis.lanesEnqueue(...args) : await this.enqueueWithAdds(args, cards), cards.length);
    if (reply.callbackBacklog !== undefined) {
      const lane = reply.callbackBacklogLane;
      return {
        ok: false,
        callbackBacklog: { length: reply.callbackBacklog, ...(lane !== undefined ? { lane, max: this.laneCallbackBacklogMax } : { max: this.callbackBacklogMax }) },
      };
    }
    if (reply.laneFull !== undefined) {
      const max = this.openCardsMax.get(reply.laneFull.lane)!;
      return { ok: false, laneFull: { ...reply.laneFull, max: reply.laneFull.unit === 'cards' ? max.cards : max.bytes } };
    }
    if (reply.conflict) return { ok: false, conflicts: conflictsOf(cards, reply) };
    await this.supersedeAll(cards, reply.supersedes);
    return {
      ok: true,
      results: cards.map((card, i) => {
        const before = reply.before[i];
        return (before ? { created: false, id: card.id, state: before.state } : { created: true, id: card.id, state: 'queued' }) satisfies EnqueueOutcome;
      }),
    };
  }

  /** The MULTI of an enqueue whose jobs BullMQ adds: the record script, the adds, the guards' release. Answers the script's reply. */
  private async enqueueWithAdds(args: Array<string | number>, cards: readonly Card[]): Promise<unknown> {
    const multi = (await this.queues.get(cards[0]!.lane)!.getBackend().client).multi();
    multi.runCommand(ENQUEUE_SCRIPT, args);
    for (const card of cards) {
      const job = new Job(this.queues.get(card.lane)!, card.lane, card, withTraceOption(jobOptions(card, this.lanes.get(card.lane)!)), card.id);
      // Queued on the MULTI now; its answer comes with exec's.
      job.addJob(multi).catch(() => undefined);
    }
    multi.runCommand(ENQUEUE_RELEASE_SCRIPT, [keys.enqueueGuards()]);
    const replies = await multi.exec();
    if (!replies) throw new Error('enqueue MULTI was discarded');
    for (const [err] of replies) if (err) throw err;
    return replies[0]![1];
  }

  /**
   * One card whose job BullMQ adds: its record script, then its job unless it must get none. The
   * script answers a repeat with its state and lane; a queued record whose job is gone (a crash
   * between the two writes) gets its job again; a card in any other state never gets one.
   */
  private async enqueueOne(card: Card): Promise<EnqueueManyResult> {
    // The records-only script takes no bound (a worker's record of a job a board added itself must never be refused).
    if (card.callbackUrl) {
      const backlog = await this.callbackBacklog();
      if (backlog.length >= backlog.max) return { ok: false, callbackBacklog: backlog };
      // As the script does: a lane's count is asked only once the stream is as long as its bound.
      const owed = backlog.length >= this.laneCallbackBacklogMax ? ((await this.callbacksOwed())[card.lane] ?? 0) : 0;
      if (owed >= this.laneCallbackBacklogMax) return { ok: false, callbackBacklog: { length: owed, max: this.laneCallbackBacklogMax, lane: card.lane } };
    }
    // Checked, then written: two such enqueues at once may pass the bound by one each (this path is for another BullMQ version).
    const full = (await this.deps.store.lane(card.id)) === undefined ? await this.laneFull(card.lane, Buffer.byteLength(JSON.stringify(card))) : undefined;
    if (full) return { ok: false, laneFull: full };
    const [created] = await this.deps.store.createMany([card]);
    if (!created!.created && created!.lane !== card.lane) return { ok: false, conflicts: [{ index: 0, id: card.id, lane: created!.lane }] };
    const queue = this.queues.get(card.lane)!;
    if (created!.created || (created!.state === 'queued' && !(await queue.getJob(card.id)))) {
      await queue.add(card.lane, card, jobOptions(card, this.lanes.get(card.lane)!));
    }
    await this.supersedeAll([card], [created!.supersedes]);
    return { ok: true, results: [created!.created ? { created: true, id: card.id, state: 'queued' } : { created: false, id: card.id, state: created!.state }] };
  }

  /** The lane's bound a card of `cardBytes` would pass, were it added (a new card, or a retried one); undefined while it has room. */
  private async laneFull(lane: string, cardBytes: number): Promise<LaneFull | undefined> {
    return laneFullFor(lane, (await this.openLoad([lane]))[0]!, cardBytes);
  }

  /** Each lane's open cards: queued, running or blocked. */
  async openCards(lanes: readonly string[]): Promise<number[]> {
    return (await this.openLoad(lanes)).map((load) => load.cards);
  }

  /** Each lane's open cards and their card JSON bytes, against its bounds (one round trip; open-cards.ts). */
  openLoad(lanes: readonly string[]): Promise<LaneOpenCards[]> {
    return readOpenCards(
      this.deps.redis,
      lanes.map((lane) => ({ lane, bounds: this.openCardsMax.get(lane) ?? { cards: defaults.DEFAULT_MAX_OPEN_CARDS, bytes: defaults.DEFAULT_MAX_OPEN_BYTES } })),
    );
  }

  /** The callback stream's length (one XLEN) and the bound at which enqueues with a callbackUrl are refused. */
  async callbackBacklog(): Promise<CallbackBacklog> {
    return { length: await callbackBacklog(this.deps.redis), max: this.callbackBacklogMax };
  }

  /** Each lane's callbacks not yet delivered (keys.callbacksOwed); a lane that owes none is absent. */
  callbacksOwed(): Promise<Record<string, number>> {
    return callbacksOwed(this.deps.redis);
  }

  async job(cardId: string, lane: string): Promise<Job | undefined> {
    return (await this.queues.get(lane)?.getJob(cardId)) ?? undefined;
  }

  /**
   * A newer card of a supersede key arrived (the enqueue answered the card it replaced as newest):
   * the earlier one ends cancelled, `superseded by <id>`, if it has not started; with the newer
   * card's (else its lane's) `supersede: "cancel-running"`, a running one is cancelled too. Never
   * fails the enqueue: a cancel lost here is made good when the earlier card's run is admitted and
   * finds it is no longer its key's newest (supersede-gate.ts in apps/worker).
   */
  private async supersedeAll(cards: readonly Card[], supersedes: ReadonlyArray<string | undefined>): Promise<void> {
    await Promise.all(
      cards.map(async (card, i) => {
        const previous = supersedes[i];
        if (previous === undefined) return;
        const mode = card.supersede ?? this.lanes.get(card.lane)?.supersede ?? DEFAULT_SUPERSEDE_MODE;
        await this.cancel(previous, { reason: supersededReason(card.id), running: mode === 'cancel-running' }).catch((err: unknown) =>
          this.deps.onError?.(err instanceof Error ? err : new Error(String(err))),
        );
      }),
    );
  }

  /** Queued or blocked cards are removed from the queue; a running card is told to stop through pub/sub. */
  async cancel(cardId: string, options: CancelOptions = {}): Promise<CommandOutcome> {
    const record = await this.deps.store.get(cardId);
    if (!record) return { ok: false, code: 'CARD_NOT_FOUND', message: `no card ${cardId}` };
    if (isTerminalCardState(record.state)) {
      return { ok: false, code: 'CARD_STATE', state: record.state, message: `card ${cardId} is already ${record.state}` };
    }
    const job = await this.job(cardId, record.lane);
    const jobState = job ? await job.getState() : 'unknown';
    if (options.running === false && (record.state === 'running' || jobState === 'active')) {
      return { ok: false, code: 'CARD_BUSY', state: record.state, message: `card ${cardId} is running; it is left to run` };
    }
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
          { to: 'cancelled', attempt: record.attempts, message: options.reason ?? 'cancelled before it ran' },
          runToken === undefined ? { kind: 'board' } : { kind: 'board-if-run', token: runToken },
        );
        if (moved.ok) return { ok: true, state: 'cancelled' };
        const now = await this.deps.store.get(cardId);
        return { ok: false, code: 'CARD_STATE', ...(now ? { state: now.state } : {}), message: `card ${cardId} moved on while being cancelled` };
      }
    }
    // Running (or just became active): the slot that holds it kills its process group and records the cancel.
    const state = await this.deps.store.requestCancel(cardId, options.reason);
    if (state === undefined) return { ok: false, code: 'CARD_NOT_FOUND', message: `no card ${cardId}` };
    if (isTerminalCardState(state)) return { ok: false, code: 'CARD_STATE', state, message: `card ${cardId} is already ${state}` };
    return { ok: true, state };
  }

  /** A needs-human card goes back to the queue; its attempts are untouched. */
  async unblock(cardId: string, note?: string): Promise<CommandOutcome> {
    const record = await this.deps.store.get(cardId);
    if (!record) return { ok: false, code: 'CARD_NOT_FOUND', message: `no card ${cardId}` };
    if (record.state !== 'blocked') {
      return { ok: false, code: 'CARD_STATE', state: record.state, message: `card ${cardId} is ${record.state}, not blocked` };
    }
    if (!(await this.redrive(record, 'card.unblocked', note ? `unblocked: ${note}` : 'unblocked'))) {
      // Another writer moved it meanwhile (a second unblock, a cancel): answer what it is now.
      const now = await this.deps.store.get(cardId);
      if (now && now.state !== 'blocked') return { ok: false, code: 'CARD_STATE', state: now.state, message: `card ${cardId} is ${now.state}, not blocked` };
      // Its job is not delayed (still active, or gone): saying "queued" would leave it blocked unseen.
      return { ok: false, code: 'CARD_STATE', state: 'blocked', message: `card ${cardId} is blocked but its job could not be re-queued; try again` };
    }
    return { ok: true, state: 'queued' };
  }

  /**
   * A failed or cancelled card goes back to the queue (CardStore.retry): history kept, with the
   * reason, attempts and infra retries from 0, and a new BullMQ job under the card's id in place of
   * its finished one, written in the same script as the move. Under a BullMQ whose job layout lanes
   * does not write, the script removes the finished job and BullMQ's own add follows. A card whose
   * job a run is still ending (the worker recorded the end, BullMQ has not heard yet) is given
   * REDRIVE_HANDOVER_MS, then answered CARD_BUSY.
   */
  async retry(cardId: string, reason?: string): Promise<CommandOutcome> {
    const record = await this.deps.store.get(cardId);
    if (!record) return { ok: false, code: 'CARD_NOT_FOUND', message: `no card ${cardId}` };
    if (!isRetryableCardState(record.state)) {
      return { ok: false, code: 'CARD_STATE', state: record.state, message: `card ${cardId} is ${record.state}; only a failed or cancelled card can be retried` };
    }
    const lane = this.lanes.get(record.lane);
    if (!lane) return { ok: false, code: 'CARD_STATE', state: record.state, message: `card ${cardId} is on lane "${record.lane}", which this process does not serve` };
    const card = CardSchema.parse(Object.fromEntries(Object.keys(CardSchema.shape).flatMap((k) => (k in record ? [[k, record[k as keyof typeof record]]] : []))));
    // Checked, then written: retries at once may pass the bound by one each, where a post cannot (its script counts).
    const full = await this.laneFull(lane.name, Buffer.byteLength(JSON.stringify(card)));
    if (full) return { ok: false, code: 'LANE_FULL', state: record.state, message: `${describeLaneFull(full)}; retry as cards end` };
    const job = this.writeJobs ? ({ kind: 'write', opts: jobLayoutOpts(card, lane), priority: card.priority } as const) : ({ kind: 'clear' } as const);
    const message = reason ? `retried: ${reason}` : 'retried';
    const deadline = Date.now() + REDRIVE_HANDOVER_MS;
    let out = await this.deps.store.retry(card, { message, job });
    while (!out.ok && out.refusal === 'busy' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, REDRIVE_HANDOVER_POLL_MS));
      out = await this.deps.store.retry(card, { message, job });
    }
    if (!out.ok) {
      if (out.refusal === 'not-found') return { ok: false, code: 'CARD_NOT_FOUND', message: `no card ${cardId}` };
      if (out.refusal === 'busy')
        return { ok: false, code: 'CARD_BUSY', state: out.state, message: `card ${cardId} is ${out.state} but its job is still being ended by a run; try again shortly` };
      return { ok: false, code: 'CARD_STATE', state: out.state, message: `card ${cardId} is ${out.state}; only a failed or cancelled card can be retried` };
    }
    if (job.kind === 'clear') await this.queues.get(card.lane)!.add(card.lane, card, jobOptions(card, lane));
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
    // The card moves first: a worker may take the promoted job at once (it goes to the front), and
    // must find the card queued, with this move (a human's unblock note) in its history. Only out of
    // blocked: refused, another re-drive (the worker's and the sweep's can both find the job delayed)
    // or a cancel got there first and does the rest, and no second queued entry is written.
    const moved = await this.deps.store.transition(card, { to: 'queued', attempt: card.attempts, event, message }, { kind: 'board' }, { from: ['blocked'] });
    if (!moved.ok) return false;
    // Not promoted: its delay came due meanwhile (BullMQ moved it to waiting) or a worker took it.
    const promoted = await job.promote().then(
      () => true,
      () => false,
    );
    // BullMQ's promote puts the job behind every card waiting; this lane's worker takes it next instead.
    if (promoted && this.writeJobs) await this.deps.redis.lanesWaitFront(keys.waitList(card.lane), card.id);
    return true;
  }

  /**
   * The one re-drive loop the worker's triggers and the supervisor's sweep share: the cards of
   * `lane` that `select` picks from `blocked` (a read of CardStore.blocked; the policy is
   * selectRedrive in @lanes/supervision), each re-driven if it is still blocked when its turn comes.
   * `by` opens the history message (`<by>: <the selection's reason>`). Answers the ids re-driven.
   */
  async redriveBlocked(
    lane: string,
    blocked: readonly BlockedEntry[],
    select: (cards: Array<BlockedEntry & { lane: string }>) => RedriveSelection,
    by: string,
  ): Promise<{ ids: string[]; reason: string }> {
    const decision = select(blocked.map((b) => ({ ...b, lane })));
    if (decision.action === 'none') return { ids: [], reason: decision.reason };
    const ids: string[] = [];
    for (const id of decision.ids) {
      const record = await this.deps.store.get(id);
      if (record?.state !== 'blocked') continue;
      if (await this.redrive(record, 'card.redriven', `${by}: ${decision.reason}`)) ids.push(id);
    }
    return { ids, reason: decision.reason };
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((q) => q.close()));
  }
}
