import { z } from 'zod';
import { EnvNameSchema } from './api-token.js';
import { ConfigError } from './errors/config-error.js';
import type { ValidationIssue } from './errors/validation-issue.js';

/** A callback secret's least length, for LANES_CALLBACK_SECRET and a lane's own alike. */
export const MIN_CALLBACK_SECRET_CHARS = 16;

/**
 * A lane's own callback secret. Whoever holds a secret can verify deliveries signed with it, and so
 * sign deliveries of their own: with one secret for every lane, any board could forge another
 * board's callbacks. A lane that names one has its cards' callbacks signed with it alone (never
 * with LANES_CALLBACK_SECRET). Its value is never in the file: `fromEnv` names the variable that
 * holds it, read where the supervisor starts; `previousFromEnv`, during a rotation, the old one,
 * which signs a second `v1=`.
 */
export const CallbackSecretConfigSchema = z.strictObject({
  fromEnv: EnvNameSchema,
  previousFromEnv: EnvNameSchema.optional(),
});
export type CallbackSecretConfig = z.infer<typeof CallbackSecretConfigSchema>;

/** The variables a lane's callback secret is read from: never handed to an agent. */
export function callbackSecretEnvNames(secret: CallbackSecretConfig | undefined): string[] {
  return [secret?.fromEnv, secret?.previousFromEnv].filter((name) => name !== undefined);
}

/**
 * Each lane's own callback secrets (current first), read from `env`; lanes without one are absent.
 * Throws ConfigError naming `lanes.N.callbackSecret.fromEnv` (or `.previousFromEnv`) for a variable
 * that is unset or shorter than MIN_CALLBACK_SECRET_CHARS.
 */
export function laneCallbackSecrets(lanes: ReadonlyArray<{ name: string; callbackSecret?: CallbackSecretConfig | undefined }>, env: NodeJS.ProcessEnv): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const issues: ValidationIssue[] = [];
  lanes.forEach((lane, i) => {
    if (!lane.callbackSecret) return;
    const values: string[] = [];
    for (const field of ['fromEnv', 'previousFromEnv'] as const) {
      const name = lane.callbackSecret[field];
      if (name === undefined) continue;
      const value = env[name];
      if (value === undefined || value.length < MIN_CALLBACK_SECRET_CHARS) {
        issues.push({
          path: `lanes.${i}.callbackSecret.${field}`,
          message: `${name} is ${value === undefined ? 'unset' : `shorter than ${MIN_CALLBACK_SECRET_CHARS} characters`}`,
        });
      } else values.push(value);
    }
    out.set(lane.name, values);
  });
  if (issues.length > 0) throw new ConfigError(issues, 'environment');
  return out;
}
