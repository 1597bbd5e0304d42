import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '@lanes/cli';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, sink };
}

describe('createLogger', () => {
  it('writes pino JSON with the ids passed down through children', () => {
    const { lines, sink } = capture();
    const log = createLogger({}, sink).child({ lane: 'pr-review', slot: 's-0', sandboxId: 'lsb-1', cardId: 'c-1' });
    log.info({ event: 'card.running' }, 'card.running');
    expect(lines[0]).toMatchObject({ level: 30, lane: 'pr-review', slot: 's-0', sandboxId: 'lsb-1', cardId: 'c-1', event: 'card.running', msg: 'card.running' });
  });

  it('redacts tokens, secrets and authorization headers wherever they appear', () => {
    const { lines, sink } = capture();
    const log = createLogger({}, sink);
    log.info(
      {
        token: 'tok-abc',
        req: { headers: { authorization: 'Bearer tok-abc', cookie: 'c=1' } },
        env: { MODAL_TOKEN_SECRET: 'ms-secret', LANES_API_TOKENS: 'a,b' },
        deep: { secret: 's3', password: 'pw' },
      },
      'x',
    );
    const text = JSON.stringify(lines[0]);
    for (const secret of ['tok-abc', 'ms-secret', 'a,b', 's3', '"pw"', 'c=1']) expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
  });

  it('honours LANES_LOG_LEVEL', () => {
    const { lines, sink } = capture();
    const log = createLogger({ LANES_LOG_LEVEL: 'warn' }, sink);
    log.info('quiet');
    log.warn('loud');
    expect(lines.map((l) => l.msg)).toEqual(['loud']);
  });
});
