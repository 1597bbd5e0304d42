import { z } from 'zod';

/**
 * What an ended card's BullMQ job keeps as its `data`. While a card may run, its job's data is the
 * whole card (a worker runs it from there). Once it has ended, the card lives on in its record (the
 * API's, the status page's and a retry's source), so the job need not keep a second copy through
 * the retention: the terminal move replaces the job's data with this, in the same script
 * (card-script.ts), as BullMQ's `updateData` would. That halves what a retained card costs Redis
 * (bench/retention-memory.ts). Bull Board then shows this for a finished job.
 *
 * A job with this data is run no more: a worker that takes it (its worker crashed between the card's
 * end and BullMQ's) finishes it from the card's record (apps/worker/src/ended-job.ts).
 */
export const EndedJobDataSchema = z
  .object({
    ended: z.enum(['done', 'failed', 'cancelled']),
    id: z.string(),
  })
  .strict();
export type EndedJobData = z.infer<typeof EndedJobDataSchema>;

/** The JSON a move to `state` writes as the job's data: '' (none) unless the move ends the card. */
export function endedJobDataFor(id: string, state: string): string {
  const ended = EndedJobDataSchema.shape.ended.safeParse(state);
  return ended.success ? JSON.stringify({ ended: ended.data, id } satisfies EndedJobData) : '';
}
