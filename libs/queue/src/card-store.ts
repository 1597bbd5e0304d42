import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import {
  BlockedReasonSchema,
  CardStateSchema,
  defaults,
  legalSourcesOf,
  terminalRetentionMs,
  type BlockedReason,
  type Card,
  type CardRecord,
  type CardState,
  type LaneConfig,
  type RetentionConfig,
} from '@lanes/contracts';
import { JOB_LAYOUT_WRITABLE } from './bullmq-job-layout.js';
import { CardHashSchema, recordOf } from './card-hash.js';
import { CardList, type CardListRequest, type CardListResult } from './card-list.js';
import { renderMove, type CardMove, type CardWriter } from './card-move.js';
import { CANCEL_REASON_FIELD, CANCEL_REQUESTED_FIELD, ScriptReplySchema, defineCardScripts, writeScriptArgs, type WriteScriptInput } from './card-script.js';
import { EVENT_STREAM_MAX_LEN, type EventLog } from './event-log.js';
import { defineEnqueueScripts, enqueueArgs, parseEnqueueReply } from './enqueue-script.js';
import { keys } from './names.js';

export interface CardStoreDeps {
  redis: Redis;
  now: () => number;
  /** Not needed any more (the script appends the events); accepted so existing callers stay valid. */
  events?: EventLog;
  /** Refused writes are logged here (`card.stale-write`, `card.illegal-transition`). */
  log?: Logger;
  /**
   * The lanes whose `retention` a terminal move applies; a card of a lane not listed gets
   * `DEFAULT_TERMINAL_CARD_RETENTION_DAYS`, and a lane without `maxCards` no count bound.
   */
  lanes?: ReadonlyArray<Pick<LaneConfig, 'name'> & { retention?: Partial<RetentionConfig> }>;
  /** The most entries a history keeps (≥ 2); `DEFAULT_HISTORY_MAX_ENTRIES` unless given (tests give less). */
  historyMaxEntries?: number;
  /**
   * Whether a card's end replaces its job's data (the card's second copy) with the ended-job stub
   * (ended-job-data.ts). JOB_LAYOUT_WRITABLE unless given: only under the BullMQ lanes checked.
   */
  trimEndedJobs?: boolean;
}

/** What a transition came to. A refusal is an answer, not an error: the caller decides what it means. */
export type TransitionResult =
  | {
      ok: true;
      state: CardState;
      /** This move into `running` replaced a run that never ended. */
      takeover: boolean;
      /** Runs of this card that were replaced while their worker never said it had fenced itself. */
      crashSuspects: number;
      /** The card's infra-retry count after the move, so a run needs no read of the record. */
      infraRetries: number;
      /** A move to running found a cancel request on the card: the run is to stop before it starts anything. */
      cancelRequested: boolean;
      /** The run's lock had lapsed and the write took it back (no other run had taken the card): a late commit. */
      reclaimed: boolean;
    }
  | { ok: false; refusal: 'illegal' | 'stale' | 'not-found'; state?: CardState };

/** What a retry came to: queued again, or refused with nothing written. */
export type RetryResult = { ok: true } | { ok: false; refusal: 'not-found' } | { ok: false; refusal: 'illegal' | 'busy'; state: CardState };

/** What creating one card came to: new, or the state and lane of the card already under its id. */
export interface CreateOutcome {
  created: boolean;
  state: CardState;
  lane: string;
  /** A new card with a supersede key: the card of its key it replaced as newest, to be cancelled. */
  supersedes?: string;
}

/** Card state, attempts, history and result in Redis. Every write goes through one atomic script. */
export class CardStore {
  private readonly retentionMs = new Map<string, number>();
  private readonly retainedMax = new Map<string, number>();
  private readonly historyMaxEntries: number;

  private readonly list: CardList;

  constructor(private readonly deps: CardStoreDeps) {
    defineCardScripts(deps.redis);
    this.list = new CardList({ redis: deps.redis, now: deps.now });
    defineEnqueueScripts(deps.redis);
    for (const lane of deps.lanes ?? []) {
      this.retentionMs.set(lane.name, terminalRetentionMs(lane.retention));
      this.retainedMax.set(lane.name, lane.retention?.maxCards ?? 0);
    }
    this.historyMaxEntries = deps.historyMaxEntries ?? defaults.DEFAULT_HISTORY_MAX_ENTRIES;
    if (!Number.isInteger(this.historyMaxEntries) || this.historyMaxEntries < 2) {
      throw new Error(`historyMaxEntries must be an integer ≥ 2 (the first entry and the newest), not ${this.historyMaxEntries}`);
    }
  }

  /** Creates the record unless the id exists. Returns whether it was new, and the record. */
  async create(card: Card): Promise<{ created: boolean; record: CardRecord }> {
    const [outcome] = await this.createMany([card]);
    const record = await this.get(card.id);
    if (!record) throw new Error(`card ${card.id} vanished while being created`);
    return { created: outcome!.created, record };
  }

  /**
   * Creates each record unless its id exists, in one script call (`lanesEnqueue` in its `each`
   * mode, the same writer an enqueue's MULTI uses). An existing id is left as it is and answered
   * with its state and lane, so the caller needs no read.
   */
  async createMany(cards: readonly Card[]): Promise<CreateOutcome[]> {
    if (cards.length === 0) return [];
    const reply = parseEnqueueReply(await this.deps.redis.lanesEnqueue(...enqueueArgs(cards, this.deps.now(), EVENT_STREAM_MAX_LEN, 'each')), cards.length);
    return cards.map((card, i) => {
      const before = reply.before[i];
      const supersedes = reply.supersedes[i];
      if (before) return { created: false, state: before.state, lane: before.lane };
      return { created: true, state: 'queued', lane: card.lane, ...(supersedes !== undefined ? { supersedes } : {}) };
    });
  }

  /** A page of cards, newest update first, from the listing indexes (CardList: the guarantee while cards move). */
  async page(request: CardListRequest): Promise<CardListResult> {
    return this.list.page(request);
  }

  async get(id: string): Promise<CardRecord | undefined> {
    const [hash, history] = await Promise.all([this.deps.redis.hgetall(keys.card(id)), this.deps.redis.lrange(keys.history(id), 0, -1)]);
    if (!hash.card) return undefined;
    return recordOf(CardHashSchema.parse(hash), history);
  }

  /** The lane an existing card belongs to; one field, for checks that need nothing else. */
  async lane(id: string): Promise<string | undefined> {
    return (await this.deps.redis.hget(keys.card(id), 'lane')) ?? undefined;
  }

  /** The token of the run that holds a running card, for a writer that must act only on that run. */
  async runToken(id: string): Promise<string | undefined> {
    return (await this.deps.redis.hget(keys.card(id), 'runToken')) ?? undefined;
  }

  /**
   * Moves the card, if the move is legal from its current state and the writer may make it:
   * record, history entry and event in one atomic script. A refused move writes nothing.
   * `only.from` narrows the legal sources to the states the caller read: a conditional move, whose
   * refusal from another legal source is a race lost (another writer moved the card first), not
   * logged as an illegal write.
   */
  async transition(card: { id: string; lane: string }, move: CardMove, writer: CardWriter, only?: { from: readonly CardState[] }): Promise<TransitionResult> {
    const nowMs = this.deps.now();
    const legal = legalSourcesOf(move.to);
    const sources = only ? legal.filter((s) => only.from.includes(s)) : legal;
    const reply = await this.run({ card, to: move.to, sources, writer, rendered: renderMove(card, move, nowMs), nowMs });
    switch (reply[0]) {
      case 'ok':
        return {
          ok: true,
          state: reply[1],
          takeover: reply[2] === '1',
          crashSuspects: reply[3],
          infraRetries: reply[4],
          cancelRequested: reply[5] === '1',
          reclaimed: reply[6] === '1',
        };
      case 'not-found':
        return { ok: false, refusal: 'not-found' };
      case 'illegal':
      case 'stale': {
        if (reply[0] === 'illegal' && only && legal.includes(reply[1])) return { ok: false, refusal: 'illegal', state: reply[1] };
        const event = reply[0] === 'stale' ? 'card.stale-write' : 'card.illegal-transition';
        this.deps.log?.warn({ event, cardId: card.id, lane: card.lane, slot: move.slot, sandboxId: move.sandboxId, state: reply[1], to: move.to, writer: writer.kind }, event);
        return { ok: false, refusal: reply[0], state: reply[1] };
      }
      case 'busy':
        // Only a retry touches the job, and only a retry is answered busy.
        throw new Error(`card ${card.id}: a move to ${move.to} was answered busy`);
    }
  }

  /**
   * Queues a failed or cancelled card again (the `retry` move, `card.retried`): history kept, with
   * the reason; attempts and infra retries start again from 0; its keys no longer expire; and its
   * finished BullMQ job is replaced by a new one under the same id, in the same step (`job`:
   * `write`), or removed for the caller to add through BullMQ (`clear`). Refused, with nothing
   * written, from any other state (`illegal`), or while its job is not finished yet (`busy`).
   */
  async retry(card: { id: string; lane: string }, options: { message: string; job: NonNullable<WriteScriptInput['job']> }): Promise<RetryResult> {
    const nowMs = this.deps.now();
    const move: CardMove = { to: 'queued', event: 'card.retried', attempt: 0, infraRetries: 0, message: options.message };
    const reply = await this.run({
      card,
      to: 'queued',
      sources: legalSourcesOf('queued', 'retry'),
      writer: { kind: 'board' },
      rendered: renderMove(card, move, nowMs),
      nowMs,
      job: options.job,
    });
    switch (reply[0]) {
      case 'ok':
        return { ok: true };
      case 'not-found':
        return { ok: false, refusal: 'not-found' };
      case 'illegal':
      case 'busy':
        return { ok: false, refusal: reply[0], state: reply[1] };
      case 'stale':
        // A board writer is stale only out of running, which is no source of a retry.
        return { ok: false, refusal: 'illegal', state: reply[1] };
    }
  }

  /** Says that run `token` of the card lost its lock while alive, so its takeover is no crash. */
  async markFenced(cardId: string, token: string): Promise<void> {
    await this.deps.redis.lanesCardFenced(keys.crashSuspects(cardId), keys.fencedRuns(cardId), keys.card(cardId), token);
  }

  /**
   * Asks whichever run holds the card to cancel it: kept on the card, and published for the
   * workers listening. A finished card is left alone. Answers the card's state, or undefined when
   * there is no such card.
   */
  async requestCancel(cardId: string, reason?: string): Promise<CardState | undefined> {
    const state = await this.deps.redis.lanesCardCancel(keys.card(cardId), new Date(this.deps.now()).toISOString(), keys.cancelChannel(), cardId, reason ?? '');
    return state === '' ? undefined : CardStateSchema.parse(state);
  }

  /** Why the card's cancel was asked for, when it was not a plain cancel (`superseded by <id>`). */
  async cancelReason(cardId: string): Promise<string | undefined> {
    return (await this.deps.redis.hget(keys.card(cardId), CANCEL_REASON_FIELD)) ?? undefined;
  }

  /** Which of these cards have a cancel request (one round trip). */
  async cancelRequested(cardIds: readonly string[]): Promise<string[]> {
    if (cardIds.length === 0) return [];
    const pipeline = this.deps.redis.pipeline();
    for (const id of cardIds) pipeline.hexists(keys.card(id), CANCEL_REQUESTED_FIELD);
    const replies = (await pipeline.exec()) ?? [];
    return cardIds.filter((_, i) => replies[i]?.[1] === 1);
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
      const reason = BlockedReasonSchema.safeParse(reasons[i]?.[1]);
      if (reason.success) out.push({ ...e, blockedReason: reason.data });
    });
    return out;
  }

  private async run(input: Omit<WriteScriptInput, 'retentionMs' | 'retainedMax' | 'historyMaxEntries' | 'trimEndedJob'>) {
    const args = writeScriptArgs({
      ...input,
      retentionMs: this.retentionMs.get(input.card.lane) ?? terminalRetentionMs(undefined),
      // A lane this store was not given keeps its finished cards by age alone: no count bound is guessed, since it destroys.
      retainedMax: this.retainedMax.get(input.card.lane) ?? 0,
      historyMaxEntries: this.historyMaxEntries,
      trimEndedJob: this.deps.trimEndedJobs ?? JOB_LAYOUT_WRITABLE,
    });
    return ScriptReplySchema.parse(await this.deps.redis.lanesCardWrite(...args));
  }
}
