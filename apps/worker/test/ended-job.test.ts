import { randomBytes } from 'node:crypto';
import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { Redis as IORedis, type Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LaneConfigSchema, type Card, type CardRecord } from '@lanes/contracts';
import { CardStore, LaneQueues, QUEUE_PREFIX, createRedis, keys, queueName } from '@lanes/queue';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';
import { decideEndedJob, endedJobStub, finishEndedJob, type EndedJobAnswer } from '../src/ended-job.js';

const log = pino({ level: 'silent' });
const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;
/** Short, so the stalled check hands on the job of the run that "died" within the test. */
const LOCK_MS = 1_000;
const STALLED_INTERVAL_MS = 300;

describe('decideEndedJob: a job carrying the ended-job stub, by its card’s record', () => {
  const stub = { ended: 'done', id: 'c1' } as const;
  const record = (state: CardRecord['state'], lane = 'l', result?: CardRecord['result']) => ({ state, lane, ...(result ? { result } : {}) });
  it.each<[string, Parameters<typeof decideEndedJob>[3], EndedJobAnswer['kind'], string | RegExp]>([
    ['no record', undefined, 'fail', /^invalid card: data: .*no record/],
    ['a record of another lane', record('done', 'other'), 'fail', /^invalid card: data: .*lane "other"/],
    ['a record still queued', record('queued'), 'fail', /^invalid card: data: .*record is queued/],
    ['a record running', record('running'), 'fail', /^invalid card: data: .*record is running/],
    ['done', record('done', 'l', { pr: 'x' }), 'complete', ''],
    ['failed', record('failed'), 'fail', 'card c1 is already failed'],
    ['cancelled', record('cancelled'), 'fail', 'card c1 is already cancelled'],
  ])('%s', (_name, rec, kind, message) => {
    const answer = decideEndedJob('c1', 'l', stub, rec);
    expect(answer.kind).toBe(kind);
    if (answer.kind === 'fail') expect(answer.message).toMatch(message);
    else expect(answer.result).toEqual({ pr: 'x' });
  });
  it('a stub naming another card than its job is refused', () => {
    expect(decideEndedJob('c2', 'l', stub, record('done'))).toMatchObject({ kind: 'fail', message: expect.stringMatching(/^invalid card: data: .*names card c1/) });
  });
  it('only the stub is taken for one: a card, or a stub with more fields, is not', () => {
    const job = (data: unknown) => ({ data }) as Job;
    expect(endedJobStub(job(stub))).toEqual(stub);
    expect(endedJobStub(job({ id: 'c1', lane: 'l', title: 't' }))).toBeUndefined();
    expect(endedJobStub(job({ ...stub, title: 't' }))).toBeUndefined();
    expect(endedJobStub(job({ ended: 'running', id: 'c1' }))).toBeUndefined();
  });
});

/**
 * The window the stub opens: a run moved its card to done (which trims the job's data) and died
 * before BullMQ completed the job. The stalled check hands the job on, and the next worker gets
 * the stub, not the card: it finishes the job from the record, with the card's result.
 */
describe('a job handed on after its card ended (real Redis, real BullMQ)', () => {
  let server: TestRedis;
  let redis: Redis;
  const workers: Worker[] = [];
  const connections: Redis[] = [];
  const connect = () => {
    const c = new IORedis(server.url, { maxRetriesPerRequest: null });
    connections.push(c);
    return c;
  };
  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.close(true)));
    for (const c of connections) c.disconnect();
    redis?.disconnect();
    await server?.stop();
  });

  it('is completed with the card’s result, its record untouched and nothing run again', async () => {
    const lane = LaneConfigSchema.parse({ name: uid('lane'), agent: ['true'] });
    const store = new CardStore({ redis, now: Date.now, lanes: [lane], log });
    const queues = new LaneQueues({ redis, store, lanes: [lane] });
    const card: Card = { id: uid('card'), lane: lane.name, title: 't', priority: 0 };
    expect((await queues.enqueueMany([card])).ok).toBe(true);
    let ended = false;
    // The run that dies: it ends the card, then never answers BullMQ and renews no lock.
    const dying = new Worker(
      queueName(lane.name),
      async (job, token) => {
        const writer = { kind: 'run' as const, token: token! };
        const where = { attempt: 1, sandboxId: 'sb', slot: 's' };
        await store.transition(job.data as Card, { ...where, to: 'running' }, writer);
        await store.transition(job.data as Card, { ...where, to: 'done', result: { pr: 'merged' } }, writer);
        ended = true;
        await new Promise(() => undefined);
      },
      { connection: connect(), prefix: QUEUE_PREFIX, lockDuration: LOCK_MS, skipLockRenewal: true, stalledInterval: STALLED_INTERVAL_MS },
    );
    workers.push(dying);
    await waitFor('the dying run to end the card', () => ended);
    const seen: unknown[] = [];
    const next = new Worker(
      queueName(lane.name),
      async (job) => {
        seen.push(job.data);
        const stub = endedJobStub(job);
        if (!stub) throw new UnrecoverableError('the card would run again');
        return finishEndedJob({ store, lane }, job, stub, log);
      },
      { connection: connect(), prefix: QUEUE_PREFIX, lockDuration: LOCK_MS, stalledInterval: STALLED_INTERVAL_MS },
    );
    workers.push(next);
    await waitFor('the handed-on job completed', async () => (await redis.zscore(`${QUEUE_PREFIX}:${queueName(lane.name)}:completed`, card.id)) !== null, { timeoutMs: 15_000 });
    expect(seen).toEqual([{ ended: 'done', id: card.id }]);
    expect(JSON.parse((await redis.hget(keys.job(lane.name, card.id), 'returnvalue'))!)).toEqual({ pr: 'merged' });
    const record = await store.get(card.id);
    expect(record?.state).toBe('done');
    expect(record?.history.filter((h) => h.state === 'running')).toHaveLength(1);
    await queues.close();
  });
});
