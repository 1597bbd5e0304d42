import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { isTerminalCardState, type Card } from '@lanes/contracts';
import type { KeyedCard } from '@lanes/queue';
import { evaluateSupersede } from '@lanes/supervision';
import { releaseByKey, type KeyGateDeps } from './key-gate.js';

/**
 * A card with a `supersedeKey`, admitted to run (its key's one place is its own), ends here
 * `cancelled`, `superseded by <id>`, when a newer card of its key has arrived since: before it takes
 * a slot, so at most one card of a key runs and only the newest one starts. Only a card that has not
 * started is superseded here. One a run left `running` when its lock lapsed had started (a newer
 * card arriving then left it to finish, or asked it to stop with a cancel): this run takes it over
 * as any takeover does, and its move to running finds the cancel, if one was asked for. Answers
 * nothing when the card is to run; otherwise ends the processor, its places given back:
 * UnrecoverableError once the card is cancelled (as a cancel does), DelayedError when the run no
 * longer holds the job.
 */
export async function endIfSuperseded(deps: KeyGateDeps, job: Job, card: Card, token: string, admitted: readonly KeyedCard[], log: Logger): Promise<void> {
  if (card.supersedeKey === undefined) return;
  const decision = evaluateSupersede({ self: card.id, latest: await deps.keyLimits.supersedeLatest(deps.lane.name, card.supersedeKey) });
  if (decision.action === 'run') return;
  const moved = await deps.store.transition(card, { to: 'cancelled', attempt: job.attemptsMade, message: decision.reason }, { kind: 'run', token });
  // Left running by a run whose lock lapsed: started, so not superseded here (see above).
  if (!moved.ok && moved.refusal === 'stale' && moved.state === 'running') return;
  await releaseByKey(deps, admitted, token, log);
  if (moved.ok) {
    log.info({ event: 'card.superseded', by: decision.by, key: card.supersedeKey }, 'card.superseded');
    throw new UnrecoverableError('cancelled');
  }
  // Refused (logged by the store): finished meanwhile, or the job is another run's now.
  if (moved.state && isTerminalCardState(moved.state)) throw new UnrecoverableError(`card ${card.id} is already ${moved.state}`);
  throw new DelayedError();
}
