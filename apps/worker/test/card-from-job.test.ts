import { UnrecoverableError, type Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { cardFromJob } from '../src/index.js';

/** Only `id` and `data` are read, so a plain object shaped like a BullMQ Job is enough. */
const job = (id: string | undefined, data: unknown) => ({ id, data }) as unknown as Job;

function refusal(fn: () => unknown): UnrecoverableError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(UnrecoverableError);
    return err as UnrecoverableError;
  }
  throw new Error('expected an UnrecoverableError, got a card');
}

describe('cardFromJob', () => {
  it.each([
    {
      name: 'lane is filled from the queue when absent',
      data: { title: 'from a board' },
      want: { id: 'j1', lane: 'pr-review', title: 'from a board', priority: 0 },
    },
    {
      name: 'a matching lane is kept',
      data: { lane: 'pr-review', title: 't' },
      want: { id: 'j1', lane: 'pr-review', title: 't', priority: 0 },
    },
    {
      name: 'the job id wins over data.id',
      data: { id: 'from-data', title: 't' },
      want: { id: 'j1', lane: 'pr-review', title: 't', priority: 0 },
    },
    {
      name: 'every optional field passes through, metadata included',
      data: {
        title: 't',
        repo: 'https://example.invalid/r.git',
        pr: { number: 12, branch: 'fix/x', base: 'main' },
        prompt: '$(rm -rf /)',
        priority: 5,
        callbackUrl: 'https://example.invalid/cb',
        metadata: { board: 'kanban', nested: [1, null, { a: true }] },
      },
      want: {
        id: 'j1',
        lane: 'pr-review',
        title: 't',
        repo: 'https://example.invalid/r.git',
        pr: { number: 12, branch: 'fix/x', base: 'main' },
        prompt: '$(rm -rf /)',
        priority: 5,
        callbackUrl: 'https://example.invalid/cb',
        metadata: { board: 'kanban', nested: [1, null, { a: true }] },
      },
    },
  ])('$name', ({ data, want }) => {
    expect(cardFromJob(job('j1', data), 'pr-review')).toEqual(want);
  });

  it('a card for another lane is refused, naming lane', () => {
    const err = refusal(() => cardFromJob(job('j1', { lane: 'other', title: 't' }), 'pr-review'));
    expect(err.message).toMatch(/^invalid card: lane: /);
    expect(err.message).toContain('"other"');
    expect(err.message).toContain('"pr-review"');
  });

  it.each([
    { name: 'null', data: null },
    { name: 'a string', data: 'a card' },
    { name: 'a number', data: 42 },
    { name: 'an array', data: [{ title: 't' }] },
    { name: 'undefined', data: undefined },
  ])('non-object data ($name) is refused', ({ data }) => {
    const err = refusal(() => cardFromJob(job('j1', data), 'pr-review'));
    expect(err.message).toMatch(/^invalid card: .*expected object/);
  });

  it.each([
    { name: 'missing title', data: {}, field: 'title' },
    { name: 'empty title', data: { title: '' }, field: 'title' },
    { name: 'title not a string', data: { title: 7 }, field: 'title' },
    { name: 'pr.number not a number', data: { title: 't', pr: { number: 'twelve', branch: 'b' } }, field: 'pr.number' },
    { name: 'pr.number not positive', data: { title: 't', pr: { number: 0, branch: 'b' } }, field: 'pr.number' },
    { name: 'pr.branch missing', data: { title: 't', pr: { number: 1 } }, field: 'pr.branch' },
    { name: 'priority negative', data: { title: 't', priority: -1 }, field: 'priority' },
    { name: 'callbackUrl not a URL', data: { title: 't', callbackUrl: 'not a url' }, field: 'callbackUrl' },
    { name: 'bad lane name', data: { lane: 'a:b', title: 't' }, field: 'lane' },
    { name: 'unknown key', data: { title: 't', colour: 'red' }, field: 'colour' },
  ])('bad field ($name) is refused with a message naming $field', ({ data, field }) => {
    const err = refusal(() => cardFromJob(job('j1', data), 'pr-review'));
    // describeIssues writes `path: message`; an unknown key is named in the message itself.
    expect(err.message).toMatch(field === 'colour' ? /"colour"/ : new RegExp(`(^|[ ;])${field.replace('.', '\\.')}: `));
  });

  it('a job id that is not a valid card id is refused, naming id', () => {
    const err = refusal(() => cardFromJob(job('has:colon', { title: 't' }), 'pr-review'));
    expect(err.message).toMatch(/\bid: /);
  });
});
