import { readFileSync } from 'node:fs';
import type { CardInput, CardListQueryInput, CardSummary } from '@lanes/contracts';
import type { LanesClient } from '@lanes/client';
import { printable } from './printable.js';
import { table } from './table.js';

type Print = (s: string) => void;

export async function enqueueCommand(client: LanesClient, flags: Record<string, string | boolean | undefined>, print: Print): Promise<number> {
  let body: CardInput | { cards: CardInput[] };
  if (typeof flags.json === 'string') {
    // The API validates it and names any bad field.
    body = JSON.parse(readFileSync(flags.json === '-' ? 0 : flags.json, 'utf8')) as CardInput | { cards: CardInput[] };
  } else {
    body = {
      ...(typeof flags.id === 'string' ? { id: flags.id } : {}),
      lane: flags.lane as string,
      title: flags.title as string,
      ...(typeof flags.prompt === 'string' ? { prompt: flags.prompt } : {}),
      ...(typeof flags.repo === 'string' ? { repo: flags.repo } : {}),
    };
  }
  const rows = 'cards' in body ? await client.enqueueMany(body.cards) : [await client.enqueue(body)];
  print(
    table(
      ['card', 'state', 'new'],
      rows.map((r) => [r.id, r.state, r.created ? 'yes' : 'no (existing id)']),
    ),
  );
  return 0;
}

export async function statusCommand(client: LanesClient, id: string, print: Print): Promise<number> {
  const card = await client.get(id);
  print(
    table(
      ['card', 'lane', 'state', 'reason', 'attempts', 'infra retries', 'sandbox', 'exit seen'],
      [[card.id, card.lane, card.state, card.blockedReason ?? card.failedReason, card.attempts, card.infraRetries, card.sandboxId, card.observedExitCode]],
    ),
  );
  print('');
  print(
    table(
      ['at', 'state', 'attempt', 'sandbox', 'detail'],
      card.history.map((h) => [h.at, h.state + (h.blockedReason ? ` (${h.blockedReason})` : ''), h.attempt, h.sandboxId, h.message]),
    ),
  );
  // JSON escapes C0 controls, not C1 ones or bidi overrides.
  if (card.result !== undefined) print(`\nresult: ${printable(JSON.stringify(card.result))}`);
  return 0;
}

export async function lanesCommand(client: LanesClient, print: Print): Promise<number> {
  const body = { lanes: await client.lanes() };
  print(
    table(
      ['lane', 'provider', 'waiting', 'active', 'delayed', 'blocked', 'done', 'failed', 'open / max', 'slots', 'desired', 'breaker', 'outage'],
      body.lanes.map((l) => [
        l.name,
        l.provider,
        l.counts.waiting,
        l.counts.active,
        l.counts.delayed,
        l.counts.blocked,
        l.counts.completed,
        l.counts.failed,
        l.open ? `${l.open.cards} / ${l.open.maxCards}` : undefined,
        l.slots.length,
        l.desiredSlots,
        l.breaker.state,
        l.outage ? 'yes' : 'no',
      ]),
    ),
  );
  const slots = body.lanes.flatMap((l) => l.slots.map((s) => [l.name, s.slot, s.sandbox?.id, s.sandbox?.state, s.sandbox?.pid, s.cardId]));
  if (slots.length) print(`\n${table(['lane', 'slot', 'sandbox', 'state', 'pid', 'card'], slots)}`);
  return 0;
}

/** `lanes cards`: a page of cards as a table, newest update first; `--all` follows every page. */
export async function cardsCommand(client: LanesClient, flags: Record<string, string | boolean | undefined>, print: Print): Promise<number> {
  const str = (key: string) => (typeof flags[key] === 'string' ? (flags[key] as string) : undefined);
  // The API validates each value and names a bad one (a state that is none, a limit over 200).
  const query = Object.fromEntries(
    Object.entries({ lane: str('lane'), state: str('state'), blockedReason: str('blocked-reason'), updatedSince: str('since'), limit: str('limit') }).filter(
      ([, v]) => v !== undefined,
    ),
  ) as Omit<CardListQueryInput, 'cursor'>;
  const rows: CardSummary[] = [];
  let next: string | undefined;
  if (flags.all === true) {
    for await (const card of client.cards(query)) rows.push(card);
  } else {
    const cursor = str('cursor');
    const page = await client.list({ ...query, ...(cursor ? { cursor } : {}) });
    rows.push(...page.cards);
    next = page.nextCursor;
  }
  print(
    table(
      ['card', 'lane', 'state', 'reason', 'attempts', 'updated', 'title'],
      rows.map((c) => [c.id, c.lane, c.state, c.blockedReason ?? c.failedReason, c.attempts, c.updatedAt, c.title]),
    ),
  );
  if (next) print(`\nmore: add --cursor ${next} (or list them all with --all)`);
  return 0;
}

export async function cardAction(client: LanesClient, action: 'cancel' | 'unblock' | 'retry', id: string, note: string | undefined, print: Print): Promise<number> {
  const body = action === 'cancel' ? await client.cancel(id) : action === 'unblock' ? await client.unblock(id, note) : await client.retry(id, note);
  print(table(['card', 'state'], [[body.id, body.state]]));
  return 0;
}
