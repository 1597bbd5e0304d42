import { ConfigError, type LanesConfig, type ValidationIssue } from '@lanes/contracts';

/**
 * Refuses at boot a config whose lanes need credentials that are not there, instead of letting
 * every slot fail its creates (and open its breaker) at run time.
 */
export function checkProviderCredentials(
  config: LanesConfig,
  env: { MODAL_TOKEN_ID?: string | undefined; MODAL_TOKEN_SECRET?: string | undefined },
  hasModalProfile: boolean,
): void {
  const issues: ValidationIssue[] = [];
  const modalReady = Boolean(env.MODAL_TOKEN_ID && env.MODAL_TOKEN_SECRET) || hasModalProfile;
  config.lanes.forEach((lane, i) => {
    if (lane.provider === 'modal' && !modalReady) {
      issues.push({ path: `lanes.${i}.provider`, message: `lane "${lane.name}" uses modal: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (or a ~/.modal.toml profile)` });
    }
  });
  if (issues.length) throw new ConfigError(issues);
}
