import { readFileSync } from 'node:fs';
import type { CardRecord, LaneStatus } from '@lanes/contracts';
import { call, type ClientOptions } from './client.js';
import { table } from './table.js';

type Print = (s: string) => void;

export async function enqueueCommand(client: ClientOptions, flags: Record<string, string | boolean | undefined>, print: Print): Promise<number> {
  let body: unknown;
  if (typeof flags.json === 'string') {
    body = JSON.parse(readFileSync(flags.json === '-' ? 0 : flags.json, 'utf8'));
  } else {
    body = {
      ...(typeof flags.id === 'string' ? { id: flags.id } : {}),
      lane: flags.lane,
      title: flags.title,
      ...(typeof flags.prompt === 'string' ? { prompt: flags.prompt } : {}),
      ...(typeof flags.repo === 'string' ? { repo: flags.repo } : {}),
    };
  }
  const res = await call<{ id?: string; state?: string; cards?: Array<{ id: string; state: string; created: boolean }> }>(client, 'POST', '/v1/cards', body);
  const rows = res.body.cards ?? [{ id: res.body.id!, state: res.body.state!, created: res.status === 202 }];
  print(table(['card', 'state', 'new'], rows.map((r) => [r.id, r.state, r.created ? 'yes' : 'no (existing id)'])));
  return 0;
}

export async function statusCommand(client: ClientOptions, id: string, print: Print): Promise<number> {
  const { body: card } = await call<CardRecord>(client, 'GET', `/v1/cards/${encodeURIComponent(id)}`);
  print(
    table(
      ['card', 'lane', 'state', 'reason', 'attempts', 'infra retries', 'sandbox', 'exit seen'],
      [[card.id, card.lane, card.state, card.blockedReason ?? card.failedReason, card.attempts, card.infraRetries, card.sandboxId, card.observedExitCode]],
    ),
  );
  print('');
  print(table(['at', 'state', 'attempt', 'sandbox', 'detail'], card.history.map((h) => [h.at, h.state + (h.blockedReason ? ` (${h.blockedReason})` : ''), h.attempt, h.sandboxId, h.message])));
  if (card.result !== undefined) print(`\nresult: ${JSON.stringify(card.result)}`);
  return 0;
}

export async function lanesCommand(client: ClientOptions, print: Print): Promise<number> {
  const { body } = await call<{ lanes: LaneStatus[] }>(client, 'GET', '/v1/lanes');
  print(
    table(
      ['lane', 'provider', 'waiting', 'active', 'delayed', 'blocked', 'done', 'failed', 'slots', 'desired', 'breaker', 'outage'],
      body.lanes.map((l) => [
        l.name,
        l.provider,
        l.counts.waiting,
        l.counts.active,
        l.counts.delayed,
        l.counts.blocked,
        l.counts.completed,
        l.counts.failed,
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

export async function cardAction(client: ClientOptions, action: 'cancel' | 'unblock', id: string, note: string | undefined, print: Print): Promise<number> {
  const { body } = await call<{ id: string; state: string }>(client, 'POST', `/v1/cards/${encodeURIComponent(id)}/${action}`, action === 'unblock' ? (note ? { note } : {}) : undefined);
  print(table(['card', 'state'], [[body.id, body.state]]));
  return 0;
}
