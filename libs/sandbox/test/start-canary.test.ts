import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { detectIsolation, probeSeparateUid, type IsolationMode } from '@lanes/sandbox';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { InitChannel, type StartCanaryEvent } from '../src/local/init-channel.js';
import { START_CANARY_ENV, START_CANARY_FAILED_LINE, startCanary, startCanaryAnswered } from '../src/local/start-canary.js';
import { localFixture, testSpec, type LocalFixture } from './support/local-fixture.js';

describe('the start canary: what counts as its answer', () => {
  const canary = startCanary('lanes-canary-n1');
  it.each<[string, StartCanaryEvent, boolean]>([
    ['its nonce', { t: 'canary', nonce: 'lanes-canary-n1' }, true],
    ['another nonce', { t: 'canary', nonce: 'lanes-canary-n2' }, false],
    ['the shell could not run echo', { t: 'canary-failed' }, false],
  ])('%s → %s', (_what, event, passed) => {
    expect(startCanaryAnswered(canary, event)).toBe(passed);
  });

  it('the line the shell echoes is the canary event, and its failure line parses as one', () => {
    expect(JSON.parse(canary.line)).toEqual({ t: 'canary', nonce: 'lanes-canary-n1' });
    expect(JSON.parse(START_CANARY_FAILED_LINE)).toEqual({ t: 'canary-failed' });
  });

  it('the channel hands on the first canary line only: one written later cannot pass for it', async () => {
    const output = new PassThrough();
    const channel = new InitChannel(new PassThrough(), output);
    const heard: StartCanaryEvent[] = [];
    channel.onStartCanary((event) => heard.push(event));
    output.write(`${START_CANARY_FAILED_LINE}\n`);
    output.write(`${canary.line}\n`);
    // A pong of a ping nobody asked for is dropped as well; it marks the end of what was written.
    const pong = new Promise<void>((resolve) => channel.request({ op: 'ping' }, () => resolve()));
    output.write('{"t":"pong","id":1}\n');
    await pong;
    expect(heard).toEqual([{ t: 'canary-failed' }]);
  });
});

const uid = probeSeparateUid(mkdtempSync(join(tmpdir(), 'lanes-start-canary-probe-')));
const namespaced: IsolationMode[] = detectIsolation() === 'pid-namespace' ? ['pid-namespace', ...(uid.ok ? (['separate-uid'] as const) : [])] : [];

describe.each(namespaced)('a new local sandbox (%s) has passed a nonce canary when create answers', (isolation) => {
  let fixture: LocalFixture | undefined;
  /** A directory of stand-ins for `echo`, first on a sandbox's PATH; open to every uid. */
  const bin = mkdtempSync(join(tmpdir(), 'lanes-start-canary-bin-'));
  chmodSync(bin, 0o755);
  const pathWith = (dir: string) => `${dir}:${process.env.PATH ?? '/usr/bin:/bin'}`;
  const standIn = (name: string, script: string): string => {
    const dir = join(bin, name);
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    writeFileSync(join(dir, 'echo'), `#!/bin/sh\n${script}\n`, { mode: 0o755 });
    return dir;
  };

  afterEach(async () => {
    await fixture?.cleanup();
    fixture = undefined;
  });
  afterAll(() => rmSync(bin, { recursive: true, force: true }));

  it('its shell echoed the nonce while the init started; the variable reaches no command', async () => {
    fixture = await localFixture({ isolation });
    const handle = await fixture.provider.create(fixture.spec);
    expect(handle.passedCanaryAtCreate).toBe(true);
    const env = await handle.exec(['env']);
    expect(env.exitCode).toBe(0);
    expect(env.stdout).not.toContain(START_CANARY_ENV);
    expect((await handle.exec(['echo', 'after'])).stdout).toBe('after\n');
  });

  it('an echo that fails, or answers another nonce, has not passed it, and the sandbox still serves', async () => {
    fixture = await localFixture({ isolation });
    for (const script of ['exit 1', `printf '%s\\n' '{"t":"canary","nonce":"forged"}'`]) {
      const dir = standIn(script.startsWith('exit') ? 'fails' : 'forges', script);
      const handle = await fixture.provider.create({ ...testSpec(), env: { PATH: pathWith(dir) } });
      expect(handle.passedCanaryAtCreate, script).toBe(false);
      expect((await handle.exec(['/bin/echo', 'served'])).stdout).toBe('served\n');
    }
  });
});

describe('a process-group sandbox has no start canary', () => {
  it('create does not claim one: the slot runs its canary', async () => {
    const fixture = await localFixture({ isolation: 'process-group' });
    try {
      const handle = await fixture.provider.create(fixture.spec);
      expect(handle.passedCanaryAtCreate).toBe(false);
      expect((await handle.exec(['env'])).stdout).not.toContain(START_CANARY_ENV);
    } finally {
      await fixture.cleanup();
    }
  });
});
