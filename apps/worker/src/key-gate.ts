import { DelayedError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { Card, LaneConfig } from '@lanes/contracts';
import type { CardStore, KeyedCard, KeyLimits } from '@lanes/queue';
import { bestEffort } from '@lanes/sandbox';
import { DEFAULT_KEY_PARK_BACKSTOP_MS, evaluateKeyAdmission } from '@lanes/supervision';
import { warnTo } from './best-effort.js';

/** What the key gate needs of the processor's deps. */
export interface KeyGateDeps {
  lane: Pick<LaneConfig, 'name' | 'maxRunningPerKey'>;
  store: Pick<CardStore, 'create'>;
  keyLimits: KeyLimits;
  /** The lane's BullMQ job of a card, to wake a parked one (BullMQ's public promote). */
  jobOf: (cardId: string) => Promise<Job | undefined>;
  now: () => number;
}

/**
 * Fair per-key concurrency, before a card takes a slot: a card whose key is at the lane's
 * `maxRunningPerKey` is parked (its job delayed, its slot never taken) and a slot goes to the next
 * job, of any key. Answers the admitted card's key, to be released when its run ends, or undefined
 * when no key limit applies. A parked (or no longer held) job ends the processor with BullMQ's
 * DelayedError: no attempt is spent.
 */
export async function admitByKey(deps: KeyGateDeps, job: Job, card: Card, token: string, log: Logger): Promise<KeyedCard | undefined> {
  const max = deps.lane.maxRunningPerKey;
  if (max === undefined || card.concurrencyKey === undefined) return undefined;
  const keyed: KeyedCard = { lane: deps.lane.name, cardId: card.id, key: card.concurrencyKey };
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
  switch (decision.action) {
    case 'admit':
      log.debug({ event: 'card.key-admitted', key: keyed.key, reason: decision.reason }, 'card.key-admitted');
      return keyed;
    case 'stale':
      // Another run holds the job: nothing moves; BullMQ hands it to whoever holds it.
      log.warn({ event: 'card.key-stale', key: keyed.key, reason: decision.reason }, 'card.key-stale');
      throw new DelayedError();
    case 'park': {
      await job.moveToDelayed(decision.retryAt, token);
      log.info({ event: 'card.key-waiting', key: keyed.key, reason: decision.reason }, 'card.key-waiting');
      // A card of the key that ended while this job was still active could not wake it: ask once more.
      if ((await deps.keyLimits.recheck(keyed, max)) === 'wake') await wakeCard(deps, card.id, log);
      throw new DelayedError();
    }
  }
}

/** The admitted card's run ended, however: its place goes, and one parked card of its key is made ready. */
export async function releaseByKey(deps: KeyGateDeps, keyed: KeyedCard, token: string, log: Logger): Promise<void> {
  await bestEffort(
    'key release',
    async () => {
      const next = await deps.keyLimits.release(keyed, token);
      if (next !== undefined) await wakeCard(deps, next, log);
    },
    warnTo(log),
  );
}

/**
 * A parked card's delayed job made waiting now, and taken next. One that is not delayed (already
 * woken, taken, or not yet moved to delayed: its own recheck wakes it) is left as it is; a wake
 * lost to a crash is made good by the park's backstop.
 */
async function wakeCard(deps: KeyGateDeps, cardId: string, log: Logger): Promise<void> {
  const job = await deps.jobOf(cardId);
  if (!job) return;
  const promoted = await job.promote().then(
    () => true,
    () => false,
  );
  if (!promoted) return;
  await deps.keyLimits.toFront(deps.lane.name, cardId);
  log.info({ event: 'card.key-woken', woken: cardId }, 'card.key-woken');
}
