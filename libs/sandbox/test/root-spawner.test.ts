import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProviderUnavailableError } from '@lanes/contracts';
import { LocalSandboxProvider } from '@lanes/sandbox';
import { afterEach, describe, expect, it } from 'vitest';
import { childrenOf, isAlive } from '../src/proc.js';
import { ROOT_SPAWNER_PATH, SpawnerProcess } from '../src/local/root-spawner.js';
import { inProcessSpawner, type RootSpawner, type SandboxRoot } from '../src/local/sandbox-root.js';
import { localFixture, testSpec, type LocalFixture } from './support/local-fixture.js';
import { waitFor } from './support/wait-for.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CREATE_AND_WAIT = fileURLToPath(new URL('./support/create-and-wait.ts', import.meta.url));
/** Short, so a test of the /proc watch does not wait the production second. */
const TEST_ORPHAN_POLL_MS = 20;
/** Kill-and-start rounds in the test of a spawner that died unnoticed. */
const SPAWNER_DEATH_ROUNDS = 5;
/** A SIGKILLed spawner is gone long before this. */
const SPAWNER_DEATH_DEADLINE_MS = 5_000;

/** A root that echoes one line of its stdin, then waits for its lifeline (fd 3) to close, then exits 7. */
const ECHO_ROOT = { command: '/bin/sh', args: ['-c', 'read line; echo "got $line"; cat <&3 >/dev/null; exit 7'], cwd: '/', env: { PATH: '/usr/bin:/bin' } };

/** The spawner processes this process started. */
function spawnerPids(parent = process.pid): number[] {
  return childrenOf(parent).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(ROOT_SPAWNER_PATH);
    } catch {
      return false;
    }
  });
}

async function firstLine(root: SandboxRoot): Promise<string> {
  root.stdout.setEncoding('utf8');
  let out = '';
  for await (const chunk of root.stdout) {
    out += chunk as string;
    if (out.includes('\n')) return out.split('\n')[0]!;
  }
  return out;
}

const spawners: Array<[string, () => RootSpawner]> = [
  ['a spawner process', () => new SpawnerProcess({ orphanPollMs: TEST_ORPHAN_POLL_MS })],
  ['this process', () => inProcessSpawner()],
];

describe.each(spawners)('sandbox roots started by %s', (_name, make) => {
  let spawner: RootSpawner | undefined;
  afterEach(() => spawner?.close());

  it('hands back the root: its channel answers, and it exits when its lifeline closes, with its code', async () => {
    spawner = make();
    const root = await spawner.start(ECHO_ROOT);
    expect(isAlive(root.pid)).toBe(true);
    root.stdin.write('hello\n');
    expect(await firstLine(root)).toBe('got hello');
    // Still up: this process holds the lifeline.
    expect(isAlive(root.pid)).toBe(true);
    root.abandon();
    expect(await root.exited).toBe(7);
  });

  it('a command that cannot start rejects with ProviderUnavailableError naming why', async () => {
    spawner = make();
    await expect(spawner.start({ ...ECHO_ROOT, command: '/nonexistent/lanes-root' })).rejects.toThrow(ProviderUnavailableError);
    await expect(spawner.start({ ...ECHO_ROOT, command: '/nonexistent/lanes-root' })).rejects.toThrow(/ENOENT/);
  });
});

describe('the spawner process', () => {
  let spawner: SpawnerProcess | undefined;
  let fixture: LocalFixture | undefined;
  afterEach(async () => {
    spawner?.close();
    await fixture?.cleanup();
    fixture = undefined;
  });

  it('starts with no environment of the stack: a root gets only what its request names', async () => {
    spawner = new SpawnerProcess();
    const secret = `lanes-secret-${process.pid}`;
    process.env.LANES_TEST_STACK_SECRET = secret;
    try {
      const root = await spawner.start({
        ...ECHO_ROOT,
        args: ['-c', 'echo "[$LANES_TEST_STACK_SECRET][$ONLY_THIS]"; cat <&3'],
        env: { PATH: '/usr/bin:/bin', ONLY_THIS: 'given' },
      });
      expect(await firstLine(root)).toBe('[][given]');
      const [pid] = spawnerPids();
      expect(pid).toBeDefined();
      expect(readFileSync(`/proc/${pid}/environ`, 'latin1')).not.toContain(secret);
      root.abandon();
      await root.exited;
    } finally {
      delete process.env.LANES_TEST_STACK_SECRET;
    }
  });

  it('killed, it fails no root it started: the root is watched in /proc, and the next start launches another spawner', async () => {
    spawner = new SpawnerProcess({ orphanPollMs: TEST_ORPHAN_POLL_MS });
    const root = await spawner.start(ECHO_ROOT);
    const [first] = spawnerPids();
    process.kill(first!, 'SIGKILL');
    await waitFor('the spawner to be gone', () => !isAlive(first!));
    // The root lives on: this process still holds its lifeline.
    root.stdin.write('after\n');
    expect(await firstLine(root)).toBe('got after');
    const next = await spawner.start(ECHO_ROOT);
    expect(spawnerPids()).not.toContain(first);
    expect(spawnerPids()).toHaveLength(1);
    // Nobody relays the first root's exit any more: /proc does (no code to read: -1).
    root.abandon();
    expect(await root.exited).toBe(-1);
    next.stdin.write('next\n');
    expect(await firstLine(next)).toBe('got next');
    next.abandon();
    expect(await next.exited).toBe(7);
  });

  it('starts sent to a spawner that died before this process saw it go are sent to a new one', async () => {
    spawner = new SpawnerProcess();
    // Which this process hears of first, the failed write or the spawner's exit, is a race: each
    // round gives the write a chance to come first.
    for (let round = 0; round < SPAWNER_DEATH_ROUNDS; round++) {
      const root = await spawner.start(ECHO_ROOT);
      const [dying] = spawnerPids();
      process.kill(dying!, 'SIGKILL');
      // Without yielding to the event loop, so this process has seen neither the exit nor the
      // channel's close: the starts' writes meet a closed socket (EPIPE).
      const deadline = performance.now() + SPAWNER_DEATH_DEADLINE_MS;
      while (isAlive(dying!)) if (performance.now() > deadline) throw new Error(`spawner ${dying} alive ${SPAWNER_DEATH_DEADLINE_MS} ms after SIGKILL`);
      const next = await Promise.all([spawner.start(ECHO_ROOT), spawner.start(ECHO_ROOT)]);
      expect(spawnerPids()).not.toContain(dying);
      expect(spawnerPids()).toHaveLength(1);
      for (const [i, r] of next.entries()) {
        r.stdin.write(`round ${round}.${i}\n`);
        expect(await firstLine(r)).toBe(`got round ${round}.${i}`);
        r.abandon();
        expect(await r.exited).toBe(7);
      }
      root.abandon();
    }
  });

  it('a start whose spawner dies, and dies again when it is sent once more, rejects naming the exit', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lanes-spawner-launches-'));
    const launches = join(dir, 'launches');
    try {
      const dying = `require('node:fs').appendFileSync(${JSON.stringify(launches)}, 'x'); process.on('message', () => process.exit(3))`;
      spawner = new SpawnerProcess({ command: [process.execPath, '-e', dying] });
      await expect(spawner.start(ECHO_ROOT)).rejects.toThrow(/root spawner exited with 3/);
      // Sent once more to a second spawner, and no further.
      expect(readFileSync(launches, 'utf8')).toBe('xx');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('is not what keeps a process alive: a script that forgets close() still exits', async () => {
    fixture = await localFixture();
    const script = [
      "import { LocalSandboxProvider } from '@lanes/sandbox';",
      `const provider = new LocalSandboxProvider({ baseDir: ${JSON.stringify(fixture.baseDir)}, isolation: 'process-group' });`,
      `const handle = await provider.create(${JSON.stringify(testSpec())});`,
      "console.log((await handle.exec(['echo', 'ran'])).stdout.trim());",
      'await handle.terminate();',
    ].join('\n');
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@lanes/source', '--input-type=module', '-e', script], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect({ code, out: out.trim() }).toEqual({ code: 0, out: 'ran' });
  });

  it('ends with the process that started it, even SIGKILLed, as do the sandboxes', async () => {
    const baseDir = await mkdtemp(join(tmpdir(), 'lanes-spawner-test-'));
    const marker = `spawner-${process.pid}-${Date.now()}`;
    const creator = spawn(process.execPath, ['--import', 'tsx', '--conditions=@lanes/source', CREATE_AND_WAIT, baseDir, 'process-group', `w-${marker}`, marker], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        creator.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('\n')) resolve(out.split('\n')[0]!);
        });
        creator.once('exit', (code) => reject(new Error(`creator exited early with ${code}`)));
      });
      const { pid: rootPid } = JSON.parse(line) as { pid: number };
      const [spawnerPid] = spawnerPids(creator.pid);
      expect(spawnerPid).toBeDefined();
      process.kill(creator.pid!, 'SIGKILL');
      await waitFor('the spawner and the sandbox root to be gone', () => !isAlive(spawnerPid!) && !isAlive(rootPid), { intervalMs: 10 });
    } finally {
      if (creator.exitCode === null && creator.signalCode === null) creator.kill('SIGKILL');
      const reaper = new LocalSandboxProvider({ baseDir });
      for (const ref of await reaper.list()) await reaper.terminateById(ref.id);
      await reaper.close();
      await rm(baseDir, { recursive: true, force: true });
    }
  });
});
