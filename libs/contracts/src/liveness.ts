import { z } from 'zod';

/**
 * What the supervisor concluded about a worker from watching its beat sequence on its own clock.
 * `unknown` (Redis not visible, just regained, or no verdict published at all) never reads as gone.
 */
export const WorkerLivenessSchema = z.enum(['alive', 'gone', 'unknown']);
export type WorkerLiveness = z.infer<typeof WorkerLivenessSchema>;

export const LivenessVerdictSchema = z.object({
  worker: z.string(),
  liveness: WorkerLivenessSchema,
  reason: z.string(),
  /** With `gone`: how long the supervisor watched the sequence stand still (its own clock). */
  silentMs: z.number().nonnegative().optional(),
});
export type LivenessVerdict = z.infer<typeof LivenessVerdictSchema>;
