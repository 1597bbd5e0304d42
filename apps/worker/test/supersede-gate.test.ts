import { randomBytes } from 'node:crypto';
import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Card } from '@lanes/contracts';
import { CardStore, createRedis, keys, type KeyLimits } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';
import type { KeyGateDeps } from '../src/key-gate.js';
import { endIfSuperseded } from '../src/supersede-gate.js';

const log = pino({ level: 'silent' });
const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

/** endIfSuperseded against the real transition script: the run fence is the script's, so no fake store. */
describe('endIfSuperseded (real Redis)', () => {
  let server: TestRedis;
  let redis: Redis;
  let store: CardStore;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    store = new CardStore({ redis, now: Date.now, log });
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const setup = async () => {
    const card: Card = { id: uid('c1'), lane: uid('lane'), title: 't', priority: 0, supersedeKey: 'acme/web#1' };
    await store.create(card);
    const deps: KeyGateDeps = {
      lane: { name: card.lane },
      store,
      // A newer card of its key has arrived.
      keyLimits: { supersedeLatest: async () => 'c2', release: async () => undefined } as unknown as KeyLimits,
      jobOf: async () => undefined,
      now: Date.now,
    };
    const job = { id: card.id, attemptsMade: 1 } as unknown as Job;
    const lockAs = (token: string) => redis.set(keys.jobLock(card.lane, card.id), token);
    return { card, deps, job, lockAs };
  };

  it('a queued card whose key has a newer card ends cancelled, superseded, as it is taken', async () => {
    const { card, deps, job, lockAs } = await setup();
    await lockAs('run-a');
    await expect(endIfSuperseded(deps, job, card, 'run-a', [], log)).rejects.toBeInstanceOf(UnrecoverableError);
    const record = await store.get(card.id);
    expect(record?.state).toBe('cancelled');
    expect(record?.history.at(-1)?.message).toBe('superseded by c2');
  });

  // Found by the chaos soak (--supersede-share, seed 11): a superseded card's run (supersede
  // "queued", so left to finish) was cut off, its lock lapsed, and its late done was refused (a
  // board cancel came meanwhile). The card stayed running under that run's token, and every next
  // run of it had its move to cancelled refused (a run may end only a card it moved to running) and
  // was delayed, for ever: the card was lost, running. A card that started is not superseded at the
  // gate: the run that holds its job takes it over, and the move to running finds the cancel.
  it('a card a lapsed run left running is taken over, not superseded at the gate: the move to running finds its cancel', async () => {
    const { card, deps, job, lockAs } = await setup();
    await lockAs('run-a');
    expect((await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb-a', slot: 'w-0' }, { kind: 'run', token: 'run-a' })).ok).toBe(true);
    await store.requestCancel(card.id, 'superseded by c2');
    // Run a's lock lapsed; BullMQ gave the job to run b.
    await lockAs('run-b');
    await expect(endIfSuperseded(deps, job, card, 'run-b', [], log)).resolves.toBeUndefined();
    expect((await store.get(card.id))?.state).toBe('running');
    const taken = await store.transition(card, { to: 'running', attempt: 2, sandboxId: 'sb-b', slot: 'w-1' }, { kind: 'run', token: 'run-b' });
    expect(taken).toMatchObject({ ok: true, takeover: true, cancelRequested: true });
    expect(await store.cancelReason(card.id)).toBe('superseded by c2');
  });

  it('leaves a card another live run holds alone: a run that lost the job to it writes nothing', async () => {
    const { card, deps, job, lockAs } = await setup();
    await lockAs('run-a');
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb-a', slot: 'w-0' }, { kind: 'run', token: 'run-a' });
    const before = (await store.get(card.id))?.history;
    // Run b asks with a token that is not the job's lock (run a still holds it); its move to running is refused next.
    await expect(endIfSuperseded(deps, job, card, 'run-b', [], log)).resolves.toBeUndefined();
    expect((await store.get(card.id))?.history).toEqual(before);
    expect(await store.transition(card, { to: 'running', attempt: 2, sandboxId: 'sb-b', slot: 'w-1' }, { kind: 'run', token: 'run-b' })).toMatchObject({
      ok: false,
      refusal: 'stale',
    });
  });

  it('a queued card whose job another run holds now is left to it: nothing written, no place kept', async () => {
    const { card, deps, job, lockAs } = await setup();
    await lockAs('run-a');
    await expect(endIfSuperseded(deps, job, card, 'run-b', [], log)).rejects.toBeInstanceOf(DelayedError);
    expect((await store.get(card.id))?.state).toBe('queued');
  });
});
