import { createHash, timingSafeEqual } from 'node:crypto';
import { ConfigError, defaults, type ApiTokenConfig, type ValidationIssue } from '@lanes/contracts';
import type { Principal } from './principal.js';

/** A token ready to match: its SHA-256, never its value. */
export interface ApiToken extends Principal {
  readonly digest: Buffer;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest();

/**
 * Compiles the API's tokens once, at boot: LANES_API_TOKENS entries become admin tokens over every
 * lane, named `LANES_API_TOKENS#1`, `#2`… by position (never by value); config tokens keep their
 * names and scopes. A `fromEnv` variable that is unset or empty, or two tokens with one value,
 * refuse to start (ConfigError naming the key).
 */
export function compileApiTokens(admin: readonly string[], scoped: readonly ApiTokenConfig[], env: Record<string, string | undefined>): ApiToken[] {
  const issues: ValidationIssue[] = [];
  const tokens: ApiToken[] = admin.map((value, i) => ({ name: `LANES_API_TOKENS#${i + 1}`, role: 'admin', lanes: '*', digest: sha256(value) }));
  scoped.forEach((t, i) => {
    let digest: Buffer | undefined;
    if (t.sha256 !== undefined) digest = Buffer.from(t.sha256, 'hex');
    else {
      const value = env[t.fromEnv!];
      if (value) digest = sha256(value);
      else issues.push({ path: `tokens.${i}.fromEnv`, message: `${t.fromEnv} is unset or empty` });
    }
    if (!digest) return;
    const twin = tokens.find((other) => other.digest.equals(digest));
    if (twin) issues.push({ path: `tokens.${i}`, message: `has the same value as token "${twin.name}"` });
    tokens.push({
      name: t.name,
      role: t.role,
      lanes: t.lanes === '*' ? '*' : new Set(t.lanes),
      cardsPerSecond: t.cardsPerSecond ?? defaults.DEFAULT_TOKEN_CARDS_PER_S,
      requestsPerSecond: t.requestsPerSecond ?? defaults.DEFAULT_TOKEN_REQUESTS_PER_S,
      digest,
    });
  });
  if (issues.length) throw new ConfigError(issues, 'API tokens');
  return tokens;
}

/**
 * The token a presented value is, or undefined. Hash first, then compare every digest in constant
 * time (equal lengths, no early exit), so neither content, length nor position leaks.
 */
export function identify(tokens: readonly ApiToken[], candidate: string): ApiToken | undefined {
  const d = sha256(candidate);
  let found: ApiToken | undefined;
  for (const t of tokens) {
    const hit = timingSafeEqual(d, t.digest);
    if (hit && !found) found = t;
  }
  return found;
}
