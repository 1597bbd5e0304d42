import { describe, expect, it } from 'vitest';
import type { SlotStatus } from '@lanes/contracts';
import type { SoakApi } from './api.js';
import { parseSoakArgs } from './args.js';
import { FaultRunner } from './faults.js';
import type { Topology } from './topology.js';

describe('FaultRunner: cancel', () => {
  it('counts a cancel only once the API accepted one: a 409 (the card ended meanwhile) moves on to another running card', async () => {
    const answers = new Map([
      ['c1', 409],
      ['c2', 202],
    ]);
    const sent: string[] = [];
    const api: SoakApi = {
      enqueue: async () => 202,
      card: async () => undefined,
      lanes: async () => [{ name: 'soak', slots: [{ cardId: 'c1' }, { cardId: 'c2' }] as SlotStatus[] } as never],
      cancel: async (id) => {
        sent.push(id);
        return answers.get(id) ?? 404;
      },
    };
    const runner = new FaultRunner({ topology: {} as Topology, api, args: parseSoakArgs([]), enqueued: () => ['c1', 'c2'], repost: async () => true, log: () => undefined });
    await runner.run({ kind: 'cancel', atMs: 0, pick: 0 });
    expect(sent).toEqual(['c1', 'c2']);
    expect(runner.injected).toEqual([expect.objectContaining({ kind: 'cancel', target: 'c2', note: 'HTTP 202 (after 1 not accepted, the last c1 HTTP 409)' })]);
    expect(runner.injected[0]!.skipped).toBeUndefined();
    expect(runner.cancelled.map((c) => [c.cardId, c.status])).toEqual([
      ['c1', 409],
      ['c2', 202],
    ]);
  });
});
