import { UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { isTerminalCardState, type CardRecord } from '@lanes/contracts';
import { EndedJobDataSchema, type CardStore, type EndedJobData } from '@lanes/queue';

/** How a job whose data is the ended-job stub is finished: completed with the card's result, or failed. */
export type EndedJobAnswer = { kind: 'complete'; result: unknown } | { kind: 'fail'; message: string };

/**
 * A job whose data is the ended-job stub (libs/queue ended-job-data.ts): its card ended, but its
 * worker died before BullMQ finished the job, so the stalled check handed it on. It runs no more
 * and takes no slot: BullMQ finishes it as the card's record says, as a run whose move to running
 * finds the card ended does (decideStart's `finished`). Only the record's own terminal state says
 * so: a stub whose record is missing, of another lane or not ended is refused as an invalid card,
 * and the record is left as it is.
 *
 * | record                       | answer                                   |
 * |------------------------------|------------------------------------------|
 * | none, other lane, not ended  | fail: invalid card (names `data`)        |
 * | done                         | complete, with the card's result         |
 * | failed, cancelled            | fail: the card is already failed/…       |
 */
export function decideEndedJob(jobId: string, lane: string, stub: EndedJobData, record: Pick<CardRecord, 'state' | 'lane' | 'result'> | undefined): EndedJobAnswer {
  const says = `the job's data says card ${jobId} ended ${stub.ended}`;
  if (stub.id !== jobId) return { kind: 'fail', message: `invalid card: data: ${says} but names card ${stub.id}` };
  if (!record) return { kind: 'fail', message: `invalid card: data: ${says}, but the card has no record` };
  if (record.lane !== lane) return { kind: 'fail', message: `invalid card: data: ${says}, but its record is of lane "${record.lane}"` };
  if (!isTerminalCardState(record.state)) return { kind: 'fail', message: `invalid card: data: ${says}, but its record is ${record.state}` };
  return answerForEndedCard(jobId, record);
}

/** What BullMQ is told of a job whose card has ended, by whoever finds it so: done completes it with the card's result; any other end fails it. */
export function answerForEndedCard(cardId: string, record: Pick<CardRecord, 'state' | 'result'>): EndedJobAnswer {
  if (record.state === 'done') return { kind: 'complete', result: record.result ?? null };
  return { kind: 'fail', message: `card ${cardId} is already ${record.state}` };
}

/** Carries an answer out in a BullMQ processor: the value that completes the job, or the error that fails it for good. */
export function settleEndedJob(answer: EndedJobAnswer): unknown {
  if (answer.kind === 'complete') return answer.result;
  throw new UnrecoverableError(answer.message);
}

/** The ended-job stub, when that is what the job carries. */
export function endedJobStub(job: Job): EndedJobData | undefined {
  const data: unknown = job.data;
  // Every job is asked: a card (no `ended` field) is told apart without a schema's failed parse.
  if (data === null || typeof data !== 'object' || !('ended' in data)) return undefined;
  const parsed = EndedJobDataSchema.safeParse(data);
  return parsed.success ? parsed.data : undefined;
}

/** Finishes a job that carries the ended-job stub, from its card's record (one read). */
export async function finishEndedJob(deps: { store: Pick<CardStore, 'get'>; lane: { name: string } }, job: Job, stub: EndedJobData, log: Logger): Promise<unknown> {
  const jobId = job.id ?? '';
  const answer = decideEndedJob(jobId, deps.lane.name, stub, await deps.store.get(jobId));
  log.info({ cardId: jobId, event: 'card.ended-job', answer: answer.kind, ...(answer.kind === 'fail' ? { reason: answer.message } : {}) }, 'card.ended-job');
  return settleEndedJob(answer);
}
