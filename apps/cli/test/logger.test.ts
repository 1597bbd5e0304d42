import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createLogger } from '@lanes/cli';
import { ConfigError } from '@lanes/contracts';
import { decideLogFormat, type LogFormat } from '../src/log-format.js';

const CLI_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');

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

describe('decideLogFormat', () => {
  it.each<[LogFormat | undefined, boolean, LogFormat]>([
    [undefined, true, 'pretty'],
    [undefined, false, 'json'],
    ['json', true, 'json'],
    ['json', false, 'json'],
    ['pretty', false, 'pretty'],
    ['pretty', true, 'pretty'],
  ])('LANES_LOG_FORMAT=%s, stdout a terminal: %s → %s', (setting, tty, format) => {
    const decision = decideLogFormat(setting, tty);
    expect(decision.format).toBe(format);
    expect(decision.reason).toBe(setting ? `LANES_LOG_FORMAT=${setting}` : tty ? 'stdout is a terminal' : 'stdout is not a terminal');
  });

  it('refuses an unknown LANES_LOG_FORMAT, naming it', () => {
    expect(() => createLogger({ LANES_LOG_FORMAT: 'yaml' }, undefined, true)).toThrow(ConfigError);
    expect(() => createLogger({ LANES_LOG_FORMAT: 'yaml' }, undefined, true)).toThrow(/LANES_LOG_FORMAT/);
  });
});

describe('createLogger through pino-pretty, in a real process', () => {
  /** Runs createLogger in a child whose stdout is a pipe, telling it whether to act as a terminal. */
  function logFrom(env: Record<string, string>, tty: boolean): string {
    const dir = mkdtempSync(join(tmpdir(), 'lanes-log-'));
    try {
      const script = join(dir, 'log.mjs');
      writeFileSync(
        script,
        [
          "import { register } from 'node:module';",
          `import { register as registerTsx } from ${JSON.stringify(pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href)};`,
          'registerTsx();',
          `register(${JSON.stringify(pathToFileURL(join(CLI_DIR, 'bin/source-condition.js')).href)});`,
          `const { createLogger } = await import(${JSON.stringify(pathToFileURL(join(CLI_DIR, 'src/logger.ts')).href)});`,
          `createLogger(${JSON.stringify(env)}, undefined, ${tty}).child({ lane: 'pr-review' }).info({ token: 'tok-never-shown', event: 'card.done' }, 'card.done');`,
        ].join('\n'),
      );
      const res = spawnSync(process.execPath, [script], { cwd: CLI_DIR, encoding: 'utf8', timeout: 30_000 });
      expect(res.status, res.stderr).toBe(0);
      return res.stdout;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('writes readable lines in a terminal, secrets still redacted', () => {
    const out = logFrom({ NO_COLOR: '1' }, true);
    expect(out).toMatch(/INFO.*card\.done/);
    expect(out).toContain('"lane":"pr-review"');
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).not.toContain('tok-never-shown');
    expect(() => JSON.parse(out.split('\n')[0]!)).toThrow();
  });

  it('writes JSON when asked, even in a terminal', () => {
    const line = JSON.parse(logFrom({ LANES_LOG_FORMAT: 'json' }, true).trim()) as Record<string, unknown>;
    expect(line).toMatchObject({ msg: 'card.done', lane: 'pr-review', token: '[redacted]' });
  });
});
