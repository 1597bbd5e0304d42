import { createHmac } from 'node:crypto';

/** The header a delivery's signature travels in (LANES_CALLBACK_SECRET). */
export const SIGNATURE_HEADER = 'x-lanes-signature';

const hmac = (secret: string, text: string) => createHmac('sha256', secret).update(text).digest('hex');

/**
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the timestamp is signed with the body,
 * so a receiver can refuse a captured delivery replayed later.
 */
export function signBody(secret: string, body: string, unixSeconds: number): string {
  return signatureHeader([secret], body, unixSeconds);
}

/**
 * One `v1=` per secret, the current one first (Stripe's scheme during a secret roll): a receiver
 * accepts the delivery when any `v1` matches its own secret, so a board still holding the previous
 * secret verifies, and so does one already holding the new one.
 */
export function signatureHeader(secrets: readonly string[], body: string, unixSeconds: number): string {
  return [`t=${unixSeconds}`, ...secrets.map((s) => `v1=${hmac(s, `${unixSeconds}.${body}`)}`)].join(',');
}
