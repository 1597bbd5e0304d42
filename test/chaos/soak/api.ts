import type { CardRecord, LaneStatus } from '@lanes/contracts';

/** Each request gets this long: the API answers 503 at once while Redis is away, so this only bounds a wedged API. */
const REQUEST_TIMEOUT_MS = 10_000;

export interface SoakApi {
  enqueue(
    cards: Array<{ id: string; lane: string; title: string; metadata: Record<string, unknown>; concurrencyKey?: string; supersedeKey?: string; supersede?: string }>,
  ): Promise<number>;
  card(id: string): Promise<CardRecord | undefined>;
  lanes(): Promise<LaneStatus[] | undefined>;
  cancel(id: string): Promise<number>;
}

export function soakApi(baseUrl: string): SoakApi {
  const req = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      // Every mutation says JSON (the API refuses others with 415), a bodyless cancel too.
      headers: { 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
  };
  return {
    async enqueue(cards) {
      return (await req('POST', '/v1/cards', { cards })).status;
    },
    async card(id) {
      const r = await req('GET', `/v1/cards/${encodeURIComponent(id)}`);
      return r.status === 200 ? (r.body as CardRecord) : undefined;
    },
    async lanes() {
      const r = await req('GET', '/v1/lanes');
      return r.status === 200 ? (r.body as { lanes: LaneStatus[] }).lanes : undefined;
    },
    async cancel(id) {
      return (await req('POST', `/v1/cards/${encodeURIComponent(id)}/cancel`)).status;
    },
  };
}
