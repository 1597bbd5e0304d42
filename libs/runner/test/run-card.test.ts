import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LaneConfigSchema, ProviderInvalidError, agentLimits, ProviderUnavailableError, type Card, type LaneConfig, type LaneConfigInput } from '@lanes/contracts';
import { createLocalProvider, type LocalSandboxProvider, type OutputStream, type SandboxHandle } from '@lanes/sandbox';
import { cardPaths, prepareCard, runCard, type RunOutcome } from '@lanes/runner';
import { waitFor } from '../../../test/harness/index.js';

/** Short graces keep the timeout and cancel cases quick while still escalating through every signal. */
const KILL_GRACE_MS = 200;
const CANARY_TIMEOUT_MS = 2_000;

/** One agent for every case: what it does is read from the card's metadata, as a real agent reads its card. */
const AGENT_SOURCE = `
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const raw = readFileSync(process.env.LANES_CARD_FILE, 'utf8');
const card = JSON.parse(raw);
const m = card.metadata ?? {};
const out = process.env.LANES_OUTPUT_DIR;
const write = (name, v) => writeFileSync(join(out, name), typeof v === 'string' ? v : JSON.stringify(v));
switch (m.mode) {
  case 'result': write('result.json', JSON.stringify(m.result)); process.exit(0);
  case 'no-result': process.exit(0);
  case 'bad-result': write('result.json', '{"pr": '); process.exit(0);
  case 'exit-75': console.log('looked around'); console.log(m.reason); process.exit(75);
  case 'blocked-json': console.log('not this line'); write('blocked.json', { reason: m.reason }); process.exit(m.exitCode);
  case 'fail': process.stdout.write(m.stdout ?? ''); process.stderr.write(m.stderr ?? ''); process.exit(m.exitCode);
  case 'env': {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('LANES_') && !k.startsWith('LANES_SANDBOX') && k !== 'LANES_TEST_SPEC_ENV'));
    write('result.json', { env, cwd: process.cwd(), setupMarker: existsSync('setup-marker') ? readFileSync('setup-marker', 'utf8') : null, cardFile: raw });
    process.exit(0);
  }
  case 'sh': { const { execFileSync } = await import('node:child_process'); execFileSync('sh', ['-c', m.script], { stdio: 'inherit' }); process.exit(m.exitCode ?? 0); }
  case 'by-attempt': if (process.env.LANES_ATTEMPT === '1') write('result.json', { attempt: 1 }); process.exit(0);
  case 'sleep': console.log('started'); setInterval(() => undefined, 1_000); break;
  case 'answer-on-int': process.on('SIGINT', () => { write('result.json', JSON.stringify(m.result)); process.exit(m.exitCode); }); console.log('started'); setInterval(() => undefined, 1_000); break;
  default: console.error('unknown mode ' + m.mode); process.exit(2);
}
`;

/** A bash agent that touches card text only the safe way: quoted expansions and file copies. */
const BASH_AGENT_SOURCE = `
set -eu
printf '%s' "$LANES_CARD_TITLE" > "$LANES_OUTPUT_DIR/title.txt"
cp "$LANES_CARD_FILE" "$LANES_OUTPUT_DIR/card-copy.json"
exit 0
`;

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

describe('runCard on a real local sandbox', () => {
  let dir: string;
  let provider: LocalSandboxProvider;
  let handle: SandboxHandle;
  let agentPath: string;
  let bashAgentPath: string;
  let n = 0;
  const newNonce = () => `nonce-${n++}`;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lanes-runner-test-'));
    agentPath = join(dir, 'agent.mjs');
    writeFileSync(agentPath, AGENT_SOURCE);
    bashAgentPath = join(dir, 'agent.sh');
    writeFileSync(bashAgentPath, BASH_AGENT_SOURCE);
    provider = createLocalProvider({ baseDir: join(dir, 'sandboxes'), killGraceMs: KILL_GRACE_MS });
    handle = await provider.create({ image: 'local', tags: { lane: 'runner-test', slot: '0', worker: `w-${process.pid}` } });
  });
  afterAll(async () => {
    await handle?.terminate();
    await provider?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const lane = (over: Partial<LaneConfigInput> = {}): LaneConfig =>
    LaneConfigSchema.parse({ name: 'runner-test', agent: [process.execPath, agentPath], killGraceMs: KILL_GRACE_MS, canaryTimeoutMs: CANARY_TIMEOUT_MS, ...over });
  const card = (metadata: Record<string, unknown>, over: Partial<Card> = {}): Card =>
    ({ id: uid('card'), lane: 'runner-test', title: 'Fix flaky test', priority: 0, metadata, ...over }) as Card;
  const run = (
    c: Card,
    l: LaneConfig = lane(),
    extra: { attempt?: number; signal?: AbortSignal; answerOutlivesStop?: () => boolean; onOutput?: (s: OutputStream, chunk: string) => void; on?: SandboxHandle } = {},
  ): Promise<RunOutcome> =>
    runCard(
      { handle: extra.on ?? handle, newNonce, canaryTimeoutMs: CANARY_TIMEOUT_MS },
      {
        card: c,
        lane: l,
        attempt: extra.attempt ?? 1,
        ...(extra.signal ? { signal: extra.signal } : {}),
        ...(extra.answerOutlivesStop ? { answerOutlivesStop: extra.answerOutlivesStop } : {}),
        ...(extra.onOutput ? { onOutput: extra.onOutput } : {}),
      },
    );
  /** onOutput that resolves once the agent printed `started`. */
  const started = () => {
    let text = '';
    let seen!: () => void;
    const promise = new Promise<void>((resolve) => (seen = resolve));
    return {
      promise,
      onOutput: (_s: OutputStream, chunk: string) => {
        text += chunk;
        if (text.includes('started')) seen();
      },
    };
  };

  it('exit 0 with result.json is done with that result', async () => {
    const result = { pr: 'https://example.invalid/pr/12', files: ['a.ts'], n: 0, ok: true };
    expect(await run(card({ mode: 'result', result }))).toEqual({ kind: 'done', result, step: 'agent' });
  });

  it("the card before in the same sandbox loses its directory as the next card's are reset; a re-run of the same card keeps its own", async () => {
    const input = (c: Card, previousCardId?: string) => ({ card: c, lane: lane(), attempt: 1, ...(previousCardId ? { previousCardId } : {}) });
    const deps = { handle, newNonce, canaryTimeoutMs: CANARY_TIMEOUT_MS };
    const first = card({ mode: 'result', result: 1 });
    const second = card({ mode: 'result', result: 2 });
    expect(await runCard(deps, input(first))).toMatchObject({ kind: 'done', result: 1 });
    writeFileSync(join(cardPaths(handle.workdir, first.id).workDir, 'clone.txt'), 'a repository clone');

    expect(await runCard(deps, input(second, first.id))).toMatchObject({ kind: 'done', result: 2 });
    expect(existsSync(cardPaths(handle.workdir, first.id).dir)).toBe(false);
    expect(existsSync(cardPaths(handle.workdir, second.id).resultFile)).toBe(true);

    expect(await runCard(deps, input(second, second.id))).toMatchObject({ kind: 'done', result: 2 });
    expect(existsSync(cardPaths(handle.workdir, second.id).cardFile)).toBe(true);
  });

  it('exit 0 without result.json is done with result undefined', async () => {
    const outcome = await run(card({ mode: 'no-result' }));
    expect(outcome).toEqual({ kind: 'done', step: 'agent' });
    expect(outcome.kind === 'done' && 'result' in outcome ? outcome.result : undefined).toBeUndefined();
  });

  it('exit 0 with an invalid result.json is failed, saying so', async () => {
    const outcome = await run(card({ mode: 'bad-result' }));
    expect(outcome).toMatchObject({ kind: 'failed', failedReason: 'command-failed', exitCode: 0, step: 'agent' });
    expect(outcome.kind === 'failed' && outcome.message).toMatch(/result\.json is not valid JSON/);
  });

  it('exit 75 is needs-human with the last stdout line as the reason', async () => {
    expect(await run(card({ mode: 'exit-75', reason: 'which base branch?' }))).toEqual({ kind: 'needs-human', reason: 'which base branch?', exitCode: 75, step: 'agent' });
  });

  it.each([0, 3, 75])('blocked.json with a reason is needs-human with that reason (exit %i)', async (exitCode) => {
    expect(await run(card({ mode: 'blocked-json', reason: 'needs repo credentials', exitCode }))).toEqual({
      kind: 'needs-human',
      reason: 'needs repo credentials',
      exitCode,
      step: 'agent',
    });
  });

  it.each([
    ['a FIFO as result.json', 'mkfifo "$LANES_OUTPUT_DIR/result.json"', 'result.json is a FIFO, not a regular file'],
    ['a link to /dev/zero', 'ln -s /dev/zero "$LANES_OUTPUT_DIR/result.json"', 'result.json is a symbolic link; lanes reads no file through a link'],
    [
      "blocked.json linked to the worker's own environment",
      'ln -s /proc/self/environ "$LANES_OUTPUT_DIR/blocked.json"',
      'blocked.json is a symbolic link; lanes reads no file through a link',
    ],
    ['a result over maxResultBytes', 'head -c 5000 /dev/zero | tr "\\0" a > "$LANES_OUTPUT_DIR/result.json"', 'result.json is 5,000 bytes (limit 4,096 bytes)'],
  ])('%s fails the card naming the file and the rule, and the sandbox runs the next card', async (_what, script, message) => {
    const outcome = await run(card({ mode: 'sh', script, exitCode: script.includes('blocked') ? 75 : 0 }), lane({ maxResultBytes: 4_096 }));
    expect(outcome).toMatchObject({ kind: 'failed', failedReason: 'command-failed', step: 'agent', message });
    expect(await run(card({ mode: 'result', result: { ok: 1 } }))).toEqual({ kind: 'done', result: { ok: 1 }, step: 'agent' });
  });

  it('a block reason is capped at MAX_BLOCK_REASON_CHARS, from blocked.json and from the last stdout line of an exit 75', async () => {
    const huge = 'r'.repeat(100_000);
    const fromFile = await run(card({ mode: 'blocked-json', reason: huge, exitCode: 75 }), lane({ maxResultBytes: 200_000 }));
    const fromStdout = await run(card({ mode: 'exit-75', reason: huge }));
    for (const outcome of [fromFile, fromStdout]) {
      expect(outcome.kind).toBe('needs-human');
      const reason = outcome.kind === 'needs-human' ? outcome.reason : '';
      expect(reason.length).toBe(agentLimits.MAX_BLOCK_REASON_CHARS);
      expect(reason).toMatch(/^r+ … \[98,\d{3} more characters cut\]$/);
    }
  });

  it('exit 3 is failed command-failed with exit code 3 and the output tail in the message', async () => {
    const stderr = `${'x'.repeat(2_000)}\nTypeError: boom at line 7\n`;
    const outcome = await run(card({ mode: 'fail', exitCode: 3, stdout: 'some progress\n', stderr }));
    expect(outcome).toMatchObject({ kind: 'failed', failedReason: 'command-failed', exitCode: 3, step: 'agent' });
    const message = outcome.kind === 'failed' ? outcome.message : '';
    expect(message).toMatch(/^agent exited 3: /);
    expect(message).toContain('TypeError: boom at line 7');
    expect(message.length).toBeLessThan(600);
  });

  it('a bare exit 1 on a live sandbox is probed and stays a command failure', async () => {
    expect(await run(card({ mode: 'fail', exitCode: 1 }))).toMatchObject({ kind: 'failed', failedReason: 'command-failed', exitCode: 1, step: 'agent' });
    expect(await handle.poll()).toEqual({ state: 'live' });
  });

  /** The real handle, counting its polls and recording each exec's argv and result. */
  const watched = (h: SandboxHandle) => {
    const seen = { polls: 0, execs: [] as string[][], results: [] as Awaited<ReturnType<SandboxHandle['exec']>>[] };
    const on: SandboxHandle = {
      id: h.id,
      provider: h.provider,
      workdir: h.workdir,
      exec: async (argv, options) => {
        seen.execs.push([...argv]);
        const result = await h.exec(argv, options);
        seen.results.push(result);
        return result;
      },
      poll: () => {
        seen.polls++;
        return h.poll();
      },
      writeFile: (path, data) => h.writeFile(path, data),
      readFile: (path, options) => h.readFile(path, options),
      resetDirs: (paths, options) => h.resetDirs(paths, options),
      terminate: () => h.terminate(),
    };
    return { on, seen };
  };

  it.each([
    ['prints, then kills itself with SIGKILL', ['sh', '-c', 'echo hi; kill -9 $$'], 137],
    ['prints, then kills itself with SIGTERM', ['sh', '-c', 'echo hi >&2; kill -TERM $$'], 143],
    ['prints, then exits 124', ['sh', '-c', 'echo hi; exit 124'], 124],
  ] as const)('%s on a live sandbox: one poll, no canary, and the result stands as reported (command-failed)', async (_name, agentArgv, code) => {
    const { on, seen } = watched(handle);
    const outcome = await run(card({}), lane({ agent: [...agentArgv] }), { on });
    expect(outcome).toMatchObject({ kind: 'failed', failedReason: 'command-failed', exitCode: code, step: 'agent' });
    expect(seen.polls).toBe(1);
    expect(seen.execs).toEqual([agentArgv]);
  });

  it('a bare 137 (no output) on a live sandbox still gets poll and canary, and stays a command failure', async () => {
    const { on, seen } = watched(handle);
    const outcome = await run(card({}), lane({ agent: ['sh', '-c', 'kill -9 $$'] }), { on });
    expect(outcome).toMatchObject({ kind: 'failed', failedReason: 'command-failed', exitCode: 137, step: 'agent' });
    expect(seen.polls).toBe(1);
    expect(seen.execs).toEqual([
      ['sh', '-c', 'kill -9 $$'],
      ['echo', expect.stringMatching(/^nonce-/)],
    ]);
  });

  it('a sandbox that ends under an agent which printed: its exit 137 with output is confirmed by one poll, sandbox-dead with the sandbox’s code 124', async () => {
    // The init ends the sandbox when its lifetime runs out, killing the agent: the agent's exit is
    // reported (137, with what it printed), not an error, as Modal reports a terminated task's exec.
    const doomed = await provider.create({ image: 'local', timeoutMs: 2_500, tags: { lane: 'runner-test', slot: '3', worker: `w-${process.pid}` } });
    try {
      const { on, seen } = watched(doomed);
      const outcome = await run(card({ mode: 'sleep' }), lane(), { on });
      expect(seen.results.at(-1)).toMatchObject({ exitCode: 137, stdout: 'started\n', timedOut: false, cancelled: false });
      expect(outcome).toMatchObject({ kind: 'sandbox-dead', observedExitCode: 124, step: 'agent' });
      expect(outcome.kind === 'sandbox-dead' && outcome.message).toMatch(/exit 137 with output could be the sandbox's death.*exited\(124\)/);
      expect(seen.polls).toBe(1);
      expect(seen.execs).toEqual([[process.execPath, agentPath]]);
      expect(await handle.poll()).toEqual({ state: 'live' });
    } finally {
      await doomed.terminate();
    }
  });

  it('a failing setup command fails the card at setup[i] and the agent never runs', async () => {
    const c = card({ mode: 'result', result: { never: true } });
    const outcome = await run(c, lane({ setup: [['true'], ['sh', '-c', 'echo clone failed >&2; exit 4'], ['true']] }));
    expect(outcome).toMatchObject({ kind: 'failed', failedReason: 'command-failed', exitCode: 4, step: 'setup[1]' });
    expect(outcome.kind === 'failed' && outcome.message).toBe('setup[1] exited 4: clone failed');
    expect(existsSync(cardPaths(handle.workdir, c.id).resultFile)).toBe(false);

    const first = await run(card({ mode: 'result', result: 1 }), lane({ setup: [['false']] }));
    expect(first).toMatchObject({ kind: 'failed', step: 'setup[0]' });
  });

  it('setup runs before the agent, in LANES_WORK_DIR, and the protocol env and card file reach the agent', async () => {
    const c = card(
      { mode: 'env', nested: { list: [1, 'two', null, { deep: true }] }, unicode: 'é ✓ 漢字' },
      { repo: 'https://example.invalid/repo.git', pr: { number: 12, branch: 'fix/x', base: 'main' }, prompt: 'line one\nline two' },
    );
    const outcome = await run(c, lane({ setup: [['sh', '-c', 'pwd > setup-marker']], env: { LANE_ONLY: 'yes' } }), { attempt: 2 });
    expect(outcome.kind).toBe('done');
    const result = (outcome as Extract<RunOutcome, { kind: 'done' }>).result as { env: Record<string, string>; cwd: string; setupMarker: string | null; cardFile: string };
    const paths = cardPaths(handle.workdir, c.id);
    expect(result.env).toMatchObject({
      LANES_CARD_ID: c.id,
      LANES_CARD_FILE: paths.cardFile,
      LANES_OUTPUT_DIR: paths.outputDir,
      LANES_WORK_DIR: paths.workDir,
      LANES_LANE: 'runner-test',
      LANES_ATTEMPT: '2',
      LANES_PR_NUMBER: '12',
      LANES_PR_BRANCH: 'fix/x',
      LANES_PR_BASE: 'main',
      LANES_CARD_TITLE: c.title,
      LANES_CARD_REPO: 'https://example.invalid/repo.git',
    });
    expect(realpathSync(result.cwd)).toBe(realpathSync(paths.workDir));
    expect(result.setupMarker?.trim()).toBe(result.cwd);
    expect(JSON.parse(result.cardFile)).toEqual(c);
  });

  it('card text with shell metacharacters never executes and reaches the agent byte-exact', async () => {
    const marker = `/tmp/pwned-${randomBytes(6).toString('hex')}`;
    const title = `$(touch ${marker}) \`touch ${marker}\` ; touch ${marker} ; rm -rf ${marker}-dir && echo "'quoted'" | cat`;
    const prompt = `please ; rm -rf / ; $(touch ${marker}) && \`touch ${marker}\` > ${marker} $HOME \\ \n\t"' ${'$'}{IFS}`;
    const c = card({ note: `\`touch ${marker}\`` }, { title, prompt, pr: { number: 7, branch: `x$(touch ${marker})` } });
    try {
      const outcome = await run(c, lane({ agent: ['bash', bashAgentPath], setup: [['sh', '-c', 'printf %s "$LANES_CARD_TITLE" > title-in-setup.txt']] }));
      expect(outcome).toEqual({ kind: 'done', step: 'agent' });
      const paths = cardPaths(handle.workdir, c.id);
      expect(existsSync(marker)).toBe(false);
      expect(readFileSync(join(paths.outputDir, 'title.txt'), 'utf8')).toBe(title);
      expect(readFileSync(join(paths.workDir, 'title-in-setup.txt'), 'utf8')).toBe(title);
      const copied = JSON.parse(readFileSync(join(paths.outputDir, 'card-copy.json'), 'utf8')) as Card;
      expect(copied).toEqual(c);
      expect(copied.title).toBe(title);
      expect(copied.prompt).toBe(prompt);
    } finally {
      rmSync(marker, { force: true });
    }
  });

  it('a timeout fails the card with failedReason timeout, and the same sandbox runs the next card', async () => {
    const outcome = await run(card({ mode: 'sleep' }), lane({ commandTimeoutMs: 500 }));
    expect(outcome).toMatchObject({ kind: 'failed', failedReason: 'timeout', step: 'agent' });
    expect(outcome.kind === 'failed' && outcome.message).toMatch(/^agent timed out/);
    expect(await handle.poll()).toEqual({ state: 'live' });
    expect(await run(card({ mode: 'result', result: 'after timeout' }))).toEqual({ kind: 'done', result: 'after timeout', step: 'agent' });
  });

  it('an abort mid-run is cancelled, and the sandbox survives it', async () => {
    const controller = new AbortController();
    const watch = started();
    const running = run(card({ mode: 'sleep' }), lane(), { signal: controller.signal, onOutput: watch.onOutput });
    await watch.promise;
    controller.abort();
    expect(await running).toEqual({ kind: 'cancelled', step: 'agent' });
    expect(await handle.poll()).toEqual({ state: 'live' });
    expect(await run(card({ mode: 'result', result: 'after cancel' }))).toEqual({ kind: 'done', result: 'after cancel', step: 'agent' });
  });

  // An agent that answers once the stop reaches it (its SIGINT): a shutdown keeps an answer of the
  // protocol (exit 0, 75), a cancel never does, and an exit of its own failure stays a stop.
  it.each([
    ['exit 0, shutdown', 0, true, { kind: 'done', result: 'finished', step: 'agent' }],
    ['exit 75, shutdown', 75, true, { kind: 'needs-human', reason: 'started', exitCode: 75, step: 'agent' }],
    ['exit 0, cancel', 0, false, { kind: 'cancelled', step: 'agent' }],
    ['exit 130, shutdown', 130, true, { kind: 'cancelled', step: 'agent' }],
    ['exit 1, shutdown', 1, true, { kind: 'cancelled', step: 'agent' }],
  ])('an abort answered with %s', async (_name, exitCode, outlives, expected) => {
    const controller = new AbortController();
    const watch = started();
    const running = run(card({ mode: 'answer-on-int', result: 'finished', exitCode }), lane(), {
      signal: controller.signal,
      answerOutlivesStop: () => outlives,
      onOutput: watch.onOutput,
    });
    await watch.promise;
    controller.abort();
    expect(await running).toEqual(expected);
  });

  it('an already-aborted signal is cancelled before the agent starts', async () => {
    const controller = new AbortController();
    controller.abort();
    const outcome = await run(card({ mode: 'result', result: 1 }), lane(), { signal: controller.signal });
    expect(outcome.kind).toBe('cancelled');
  });

  it('a fresh attempt clears the previous attempt output (result.json of attempt 1 does not leak into attempt 2)', async () => {
    const c = card({ mode: 'by-attempt' });
    expect(await run(c, lane(), { attempt: 1 })).toEqual({ kind: 'done', result: { attempt: 1 }, step: 'agent' });
    expect(existsSync(cardPaths(handle.workdir, c.id).resultFile)).toBe(true);
    expect(await run(c, lane(), { attempt: 2 })).toEqual({ kind: 'done', step: 'agent' });
  });

  it('a trivial card starts one process, the agent: the directory reset starts none (local provider)', async () => {
    const execs: string[][] = [];
    const counted: SandboxHandle = {
      id: handle.id,
      provider: handle.provider,
      workdir: handle.workdir,
      exec: (argv, options) => {
        execs.push([...argv]);
        return handle.exec(argv, options);
      },
      poll: () => handle.poll(),
      writeFile: (path, data) => handle.writeFile(path, data),
      readFile: (path) => handle.readFile(path),
      resetDirs: (paths, options) => handle.resetDirs(paths, options),
      terminate: () => handle.terminate(),
    };
    expect(await run(card({ mode: 'no-result' }), lane(), { on: counted })).toEqual({ kind: 'done', step: 'agent' });
    expect(execs).toEqual([[process.execPath, agentPath]]);
  });

  it('a reset that cannot make the directories is failed at prepare, saying why; the agent never runs', async () => {
    const c = card({ mode: 'no-result' });
    const paths = cardPaths(handle.workdir, c.id);
    // A file where the card's directory should be: the reset cannot make out/ and work/ under it.
    await handle.writeFile(paths.dir, 'not a directory');
    const outcome = await run(c);
    expect(outcome).toMatchObject({ kind: 'failed', failedReason: 'command-failed', exitCode: 1, step: 'prepare' });
    expect(outcome.kind === 'failed' && outcome.message).toMatch(/^prepare exited 1: .*(ENOTDIR|EEXIST|not a directory|exists)/i);
  });

  it('prepareCard materializes the card without starting a process; runCard given it runs the agent on those files and prepares nothing again', async () => {
    const c = card({ mode: 'env' });
    const paths = cardPaths(handle.workdir, c.id);
    const calls: string[] = [];
    const counted: SandboxHandle = {
      id: handle.id,
      provider: handle.provider,
      workdir: handle.workdir,
      exec: (argv, options) => {
        calls.push(`exec ${argv[0]}`);
        return handle.exec(argv, options);
      },
      poll: () => handle.poll(),
      writeFile: (path, data) => {
        calls.push(`write ${path}`);
        return handle.writeFile(path, data);
      },
      readFile: (path) => handle.readFile(path),
      resetDirs: (dirs) => {
        calls.push(`reset ${dirs.join(' ')}`);
        return handle.resetDirs(dirs);
      },
      terminate: () => handle.terminate(),
    };
    const deps = { handle: counted, newNonce, canaryTimeoutMs: CANARY_TIMEOUT_MS };
    expect(await prepareCard(deps, { card: c, lane: lane() })).toBeUndefined();
    expect(calls).toEqual([`reset ${paths.outputDir} ${paths.workDir}`, `write ${paths.cardFile}`]);
    expect(JSON.parse(readFileSync(join(handle.workdir, 'cards', c.id, 'card.json'), 'utf8'))).toMatchObject({ id: c.id });

    const outcome = await runCard(deps, { card: c, lane: lane(), attempt: 1 }, Promise.resolve(undefined));
    expect(outcome).toMatchObject({ kind: 'done', step: 'agent' });
    expect(calls.slice(2)).toEqual([`exec ${process.execPath}`]);
  });

  it('runCard given a preparation that stopped the run answers that outcome and runs nothing', async () => {
    const c = card({ mode: 'no-result' });
    let execs = 0;
    const counted: SandboxHandle = {
      id: handle.id,
      provider: handle.provider,
      workdir: handle.workdir,
      exec: (argv, options) => {
        execs++;
        return handle.exec(argv, options);
      },
      poll: () => handle.poll(),
      writeFile: (path, data) => handle.writeFile(path, data),
      readFile: (path) => handle.readFile(path),
      resetDirs: (dirs) => handle.resetDirs(dirs),
      terminate: () => handle.terminate(),
    };
    const stopped: RunOutcome = { kind: 'failed', failedReason: 'command-failed', exitCode: 1, message: 'prepare exited 1', step: 'prepare' };
    expect(await runCard({ handle: counted, newNonce, canaryTimeoutMs: CANARY_TIMEOUT_MS }, { card: c, lane: lane(), attempt: 1 }, Promise.resolve(stopped))).toEqual(stopped);
    expect(execs).toBe(0);
  });

  it('a sandbox that is gone before the reset is sandbox-dead at prepare', async () => {
    const gone = await provider.create({ image: 'local', tags: { lane: 'runner-test', slot: '2', worker: `w-${process.pid}` } });
    await gone.terminate();
    expect(await run(card({ mode: 'no-result' }), lane(), { on: gone })).toMatchObject({ kind: 'sandbox-dead', step: 'prepare' });
  });

  /** The real sandbox, whose reads of one file fail as the provider would fail them. */
  const failingReads = (file: string, error: Error): SandboxHandle => ({
    id: handle.id,
    provider: handle.provider,
    workdir: handle.workdir,
    exec: (argv, options) => handle.exec(argv, options),
    poll: () => handle.poll(),
    writeFile: (path, data) => handle.writeFile(path, data),
    readFile: (path) => (path.endsWith(file) ? Promise.reject(error) : handle.readFile(path)),
    resetDirs: (paths, options) => handle.resetDirs(paths, options),
    terminate: () => handle.terminate(),
  });

  it.each([
    [
      'result.json unreadable in transport: re-run, never a silent done',
      'result.json',
      { mode: 'result', result: { pr: 1 } },
      new ProviderUnavailableError('local', 'injected: read timed out'),
      'interrupted',
    ],
    [
      'blocked.json unreadable in transport: re-run, never done',
      'blocked.json',
      { mode: 'blocked-json', reason: 'help', exitCode: 0 },
      new ProviderUnavailableError('local', 'injected: read timed out'),
      'interrupted',
    ],
    [
      'result.json refused outright: failed, naming the file',
      'result.json',
      { mode: 'result', result: { pr: 1 } },
      new ProviderInvalidError('local', 'injected: bad path'),
      'failed',
    ],
  ] as const)('%s', async (_name, file, metadata, error, kind) => {
    const outcome = await run(card(metadata), lane(), { on: failingReads(file, error) });
    expect(outcome.kind).toBe(kind);
    expect(outcome).toMatchObject({ step: 'agent' });
    if (outcome.kind === 'failed' || outcome.kind === 'interrupted') expect(outcome.message).toContain(file);
  });

  it('killing the sandbox root pid mid-run is sandbox-dead with observedExitCode 137, taken from the exec without a second poll', async () => {
    const doomed = await provider.create({ image: 'local', tags: { lane: 'runner-test', slot: '1', worker: `w-${process.pid}` } });
    try {
      const watch = started();
      let polls = 0;
      // The real handle, with its poll() calls counted: recovery must reuse what the exec saw.
      const counted: SandboxHandle = {
        id: doomed.id,
        provider: doomed.provider,
        workdir: doomed.workdir,
        exec: (argv, options) => doomed.exec(argv, options),
        poll: () => {
          polls++;
          return doomed.poll();
        },
        writeFile: (path, data) => doomed.writeFile(path, data),
        readFile: (path) => doomed.readFile(path),
        resetDirs: (paths) => doomed.resetDirs(paths),
        terminate: () => doomed.terminate(),
      };
      const running = run(card({ mode: 'sleep' }), lane(), { on: counted, onOutput: watch.onOutput });
      await watch.promise;
      process.kill(doomed.pid!, 'SIGKILL');
      const outcome = await running;
      expect(outcome).toMatchObject({ kind: 'sandbox-dead', observedExitCode: 137, step: 'agent' });
      expect(polls).toBe(0);
      expect(await doomed.poll()).toEqual({ state: 'exited', exitCode: 137 });
      // The sandbox this file shares is untouched.
      expect(await handle.poll()).toEqual({ state: 'live' });
    } finally {
      await doomed.terminate();
    }
    await waitFor('doomed sandbox gone from the listing', async () => !(await provider.list()).some((r) => r.id === doomed.id), { timeoutMs: 5_000 });
  });
});
