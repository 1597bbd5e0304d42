import { z } from 'zod';

/** creating → live → (dead | terminated); a respawn replaces the sandbox with a new id. */
export const SandboxStateSchema = z.enum(['creating', 'live', 'dead', 'terminated']);
export type SandboxState = z.infer<typeof SandboxStateSchema>;

/** An exit code the supervisor saw, or "unknown" when nothing was observed. 0 stays 0. */
export const ObservedExitCodeSchema = z.union([z.number().int(), z.literal('unknown')]);
export type ObservedExitCode = z.infer<typeof ObservedExitCodeSchema>;

/** The supervisor's reading of a command result. */
export const VerdictSchema = z.enum(['ok', 'command-failed', 'sandbox-dead', 'provider-outage']);
export type Verdict = z.infer<typeof VerdictSchema>;

/** What `poll()` found: only `exited` and `missing` are findings that a sandbox is gone. */
export const PollResultSchema = z.discriminatedUnion('state', [
  z.object({ state: z.literal('live') }),
  z.object({ state: z.literal('exited'), exitCode: z.number().int() }),
  z.object({ state: z.literal('missing') }),
]);
export type PollResult = z.infer<typeof PollResultSchema>;

export const SandboxInfoSchema = z.object({
  id: z.string(),
  state: SandboxStateSchema,
  pid: z.number().int().optional(),
  provider: z.string().optional(),
  observedExitCode: ObservedExitCodeSchema.optional(),
  since: z.string().optional(),
});
export type SandboxInfo = z.infer<typeof SandboxInfoSchema>;

/** Tags every sandbox carries, so an orphan can be traced to its owner and reaped by id. */
export const SandboxTagsSchema = z.object({
  lane: z.string(),
  slot: z.string(),
  worker: z.string(),
});
export type SandboxTags = z.infer<typeof SandboxTagsSchema>;

export const FileSyncSchema = z.strictObject({
  from: z.string().min(1),
  to: z.string().min(1),
});
export type FileSync = z.infer<typeof FileSyncSchema>;

/** What a provider needs to create one sandbox. Always from the base image, never a snapshot. */
export const SandboxSpecSchema = z.object({
  image: z.string().min(1),
  tags: SandboxTagsSchema,
  env: z.record(z.string(), z.string()).default({}),
  secrets: z.array(z.string()).default([]),
  /** Lifetime backstop for the whole sandbox (Modal requires one). */
  timeoutMs: z.number().int().positive().optional(),
});
export type SandboxSpec = z.input<typeof SandboxSpecSchema>;

/** What lanes remembers about one sandbox: who owned it, and how it ended. */
export const SandboxRecordSchema = z.object({
  id: z.string(),
  provider: z.string(),
  state: SandboxStateSchema,
  lane: z.string(),
  slot: z.string(),
  worker: z.string(),
  pid: z.number().int().optional(),
  createdAt: z.string().optional(),
  liveAt: z.string().optional(),
  deadAt: z.string().optional(),
  /** The exit code seen at decision time; `"unknown"` when nothing was observed. */
  observedExitCode: ObservedExitCodeSchema.optional(),
  reason: z.string().optional(),
  replacedBy: z.string().optional(),
});
export type SandboxRecord = z.infer<typeof SandboxRecordSchema>;
