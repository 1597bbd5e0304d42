import { DelayedError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { Card, LaneConfig } from '@lanes/contracts';
import type { CardStore, EventLog, KeyedCard, KeyLimits } from '@lanes/queue';
import { bestEffort } from '@lanes/sandbox';
import { DEFAULT_KEY_PARK_BACKSTOP_MS, evaluateKeyAdmission } from '@lanes/supervision';
import { warnTo } from './best-effort.js';

/** What the key gate needs of the processor's deps. */
export interface KeyGateDeps {
  lane: Pick<LaneConfig, 'name' | 'maxRunningPerKey'>;
  store: Pick<CardStore, 'create' | 'transition'>;
  keyLimits: KeyLimits;
  /** The lane's BullMQ job of a card, to wake a parked one (BullMQ's public promote). */
  jobOf: (cardId: string) => Promise<Job | undefined>;
  /** Where a parked card says so (card.key-waiting), for /v1/events and the board; none, only the log says so. */
  events?: Pick<EventLog, 'append'>;
  now: () => number;
}

/** One limit a card passes before it takes a slot. */
interface Gate {
  keyed: KeyedCard;
  max: number;
}

/**
 * The limits a card is under: its concurrency key's (the lane's `maxRunningPerKey`), then its
 * supersede key's (one card of a key runs at a time). Each has sets of its own.
 */
export function gatesOf(lane: KeyGateDeps['lane'], card: Card): Gate[] {
  const gates: Gate[] = [];
  if (lane.maxRunningPerKey !== undefined && card.concurrencyKey !== undefined) {
    gates.push({ keyed: { lane: lane.name, cardId: card.id, key: card.concurrencyKey }, max: lane.maxRunningPerKey });
  }
  if (card.supersedeKey !== undefined) gates.push({ keyed: { lane: lane.name, cardId: card.id, key: card.supersedeKey, gate: 'supersede' }, max: 1 });
  return gates;
}

/**
 * Fair per-key concurrency and one run per supersede key, before a card takes a slot: a card whose
 * key is at its limit is parked (its job delayed, its slot never taken) and a slot goes to the next
 * job, of any key. A card is admitted to each of its gates in turn; one that parks at a later gate
 * gives its place at the earlier ones back, so no card holds a place while it waits. Answers the
 * admitted places, to be released when the run ends. A parked (or no longer held) job ends the
 * processor with BullMQ's DelayedError: no attempt is spent.
 */
export async function admitByKey(deps: KeyGateDeps, job: Job, card: Card, token: string, log: Logger): Promise<KeyedCard[]> {
  const admitted: KeyedCard[] = [];
  for (const gate of gatesOf(deps.lane, card)) {
    try {
      await admitAt(deps, job, card, gate, token, log);
    } catch (err) {
      await releaseByKey(deps, admitted, token, log);
      throw err;
    }
    admitted.push(gate.keyed);
  }
  return admitted;
}

async function admitAt(deps: KeyGateDeps, job: Job, card: Card, gate: Gate, token: string, log: Logger): Promise<void> {
  const { keyed, max } = gate;
  let admission = await deps.keyLimits.admit(keyed, token, max, deps.now());
  if (admission.decision === 'no-record') {
    // A job put on the lane's queue straight through BullMQ, with no record yet.
    await deps.store.create(card);
    admission = await deps.keyLimits.admit(keyed, token, max, deps.now());
  }
  const nowMs = deps.now();
  const decision = evaluateKeyAdmission(
    { lock: admission.decision === 'stale' || admission.decision === 'no-record' ? 'another-run' : 'this-run', counted: admission.counted, runningOthers: admission.runningOthers },
    { maxRunningPerKey: max, parkBackstopMs: DEFAULT_KEY_PARK_BACKSTOP_MS },
    nowMs,
  );
  const fields = { key: keyed.key, gate: keyed.gate ?? 'concurrency', reason: decision.reason };
  switch (decision.action) {
    case 'admit':
      log.debug({ event: 'card.key-admitted', ...fields }, 'card.key-admitted');
      return;
    case 'stale':
      // Another run holds the job: nothing moves; BullMQ hands it to whoever holds it.
      log.warn({ event: 'card.key-stale', ...fields }, 'card.key-stale');
      throw new DelayedError();
    case 'park': {
      await job.moveToDelayed(decision.retryAt, token);
      log.info({ event: 'card.key-waiting', ...fields }, 'card.key-waiting');
      const at = new Date(nowMs).toISOString();
      const data = { ...fields, retryAt: new Date(decision.retryAt).toISOString() };
      // Best effort: the card is parked either way, and its wake does not wait on the event.
      const { events } = deps;
      if (events) await bestEffort('key-waiting event', () => events.append({ type: 'card.key-waiting', at, lane: deps.lane.name, cardId: card.id, data }), warnTo(log));
      // A card of the key that ended while this job was still active could not wake it: ask once more.
      if ((await deps.keyLimits.recheck(keyed, max)) === 'wake') await wakeCard(deps, keyed, log);
      throw new DelayedError();
    }
  }
}

/** The admitted card's run ended, however: its places go, and one parked card of each of its keys is made ready. */
export async function releaseByKey(deps: KeyGateDeps, admitted: readonly KeyedCard[], token: string, log: Logger): Promise<void> {
  for (const keyed of admitted) {
    await bestEffort(
      'key release',
      async () => {
        const next = await deps.keyLimits.release(keyed, token);
        if (next !== undefined) await wakeCard(deps, { ...keyed, cardId: next }, log);
      },
      warnTo(log),
    );
  }
}

/**
 * A parked card's delayed job made waiting now, and taken next. One that is not delayed (already
 * woken, taken, or not yet moved to delayed: its own recheck wakes it) is left as it is; a wake
 * lost to a crash is made good by the park's backstop.
 */
async function wakeCard(deps: KeyGateDeps, woken: KeyedCard, log: Logger): Promise<void> {
  const { cardId } = woken;
  const job = await deps.jobOf(cardId);
  if (!job) return;
  const promoted = await job.promote().then(
    () => true,
    () => false,
  );
  if (!promoted) return;
  await deps.keyLimits.toFront(deps.lane.name, cardId);
  log.info({ event: 'card.key-woken', woken: cardId, gate: woken.gate ?? 'concurrency' }, 'card.key-woken');
}
