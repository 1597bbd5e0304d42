import { UnrecoverableError, type Job } from 'bullmq';
import { CardValidationError, parseCard, type Card } from '@lanes/contracts';

/**
 * A job from our API or from a board that speaks BullMQ itself, validated with the same schema.
 * The job id is the card id; a missing lane is taken from the queue; a different lane is refused.
 * An invalid payload becomes an UnrecoverableError whose message names the field.
 */
export function cardFromJob(job: Job, lane: string): Card {
  const data: unknown = job.data;
  const input = data !== null && typeof data === 'object' && !Array.isArray(data) ? { lane, ...data, id: job.id } : data;
  try {
    const card = parseCard(input, () => job.id ?? '');
    if (card.lane !== lane) {
      throw new UnrecoverableError(`invalid card: lane: card says "${card.lane}" but was queued on lane "${lane}"`);
    }
    return card;
  } catch (err) {
    if (err instanceof CardValidationError) throw new UnrecoverableError(err.message);
    throw err;
  }
}
