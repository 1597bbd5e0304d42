import type { CardRecord, LaneStatus } from '@lanes/contracts';
import { waitFor } from './wait-for.js';

/** Thin JSON helpers against a running stack's API. */
export function apiClient(baseUrl: string, token?: string) {
  const request = async <T = unknown>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        // As @lanes/client does: every mutation says JSON, a bodyless one (cancel) too. `headers` may override it.
        ...(body !== undefined || method !== 'GET' ? { 'content-type': 'application/json' } : {}),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, body: json as T, text, headers: res.headers };
  };
  const card = async (id: string) => (await request<CardRecord>('GET', `/v1/cards/${id}`)).body;
  return {
    request,
    card,
    lanes: async () => (await request<{ lanes: LaneStatus[] }>('GET', '/v1/lanes')).body.lanes,
    /** Waits until the card satisfies `pred`, returning it; fails naming the last state seen. */
    async waitCard(id: string, what: string, pred: (c: CardRecord) => boolean, timeoutMs = 60_000): Promise<CardRecord> {
      let last: CardRecord | undefined;
      try {
        return await waitFor(
          `card ${id} ${what}`,
          async () => {
            last = await card(id);
            return last && pred(last) ? last : undefined;
          },
          { timeoutMs, intervalMs: 50 },
        );
      } catch (err) {
        throw new Error(
          `${(err as Error).message}; last seen: ${JSON.stringify(last && { state: last.state, blockedReason: last.blockedReason, history: last.history.map((h) => `${h.state}${h.blockedReason ? `(${h.blockedReason})` : ''}:${h.message ?? ''}`) })}`,
        );
      }
    },
  };
}

export type ApiClient = ReturnType<typeof apiClient>;
