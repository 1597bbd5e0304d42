/**
 * The sandbox provider contract, as vitest tests any provider must pass.
 *
 *   runSandboxContract('local', async () => ({ provider, spec, cleanup }));
 *
 * `setup` runs before every test and returns a `ContractFixture`; `cleanup` runs after it (the suite
 * itself terminates every sandbox it created first). Only `provider`, `spec` and `cleanup` are
 * required. Optional hooks switch on checks that need more than the `SandboxHandle` interface:
 * - `liveHostPids(envEntry)`: running host pids whose environment holds `envEntry` ("KEY=value"),
 *   where the provider's processes are visible from the test (local). Adds an outside check that a
 *   killed tree is gone; an inside check (through /proc in the sandbox) always runs.
 * - `killRoot(handle)`: kills the sandbox from outside (e.g. SIGKILL of the local root pid). Adds
 *   the dead-sandbox test: the running exec ends as `commandEndsOnDeath` allows, later execs
 *   reject with `SandboxGoneError`, poll → exited.
 * - `commandEndsOnDeath`: how the command running when its sandbox dies may end: `'gone'` (rejects
 *   with `SandboxGoneError`) or an exit status the provider reports the death as (Modal: 137, the
 *   container's SIGKILL; DESIGN rule 1). Default `['gone']`.
 * - `killGraceMs`: grace passed to kills (default 200 ms), so kill tests stay quick.
 *
 * Commands assume a Linux userland with bash, coreutils and /proc (any Debian-like image).
 */
import type { SandboxSpec } from '@lanes/contracts';
import { AgentFileError, ProviderInvalidError, SandboxGoneError } from '@lanes/contracts';
import type { CreateOptions, ExecResult, SandboxHandle, SandboxProvider } from '@lanes/sandbox';
import { CANCELLED_EXIT_CODE } from '../src/exec-result.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { outputWatcher, waitFor } from './support/wait-for.js';

export interface ContractFixture {
  provider: SandboxProvider;
  spec: SandboxSpec;
  cleanup(): Promise<void>;
  createOptions?: CreateOptions;
  killGraceMs?: number;
  liveHostPids?(envEntry: string): number[] | Promise<number[]>;
  killRoot?(handle: SandboxHandle): Promise<void>;
  /** How the running command may end when its sandbox dies from outside (default: only SandboxGoneError). */
  commandEndsOnDeath?: ReadonlyArray<'gone' | number>;
  /**
   * Lists a tree of lanes' own directory (`find . | sort` from `dir`) as lanes sees it. Default: a
   * command in the sandbox. The local provider's separate-uid mode keeps lanes' directories closed
   * to the agent's uid, so its fixture lists them from the host.
   */
  listTree?(handle: SandboxHandle, dir: string): Promise<string[]>;
}

const DEFAULT_CONTRACT_GRACE_MS = 200;
/** Slack on top of the kill escalation for process start-up and scheduling on a loaded CI box. */
/**
 * Every long command here is `sleep 30`: ending well before it proves the kill (or the death) ended
 * it, not the command itself. How fast is a benchmark's figure (bench/sandbox-exec.ts reports cancel
 * latency), not a test's.
 */
const COMMAND_SLEEP_MS = 30_000;
/** A cancelled command must leave nothing running; remote providers get this long to show it. */
const TREE_GONE_TIMEOUT_MS = 3_000;

/**
 * Lists "pid state" of every running process (zombies excluded) whose environment has
 * MARKER=$1. Runs inside the sandbox, so it sees what the sandbox sees. `$1` is argv, never code.
 */
const FIND_MARKED_SCRIPT = `
for d in /proc/[0-9]*; do
  if tr '\\0' '\\n' < "$d/environ" 2>/dev/null | grep -qxF "CONTRACT_TREE=$1"; then
    state=$(sed 's/^.*) //' "$d/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] && echo "\${d#/proc/} $state"
  fi
done
true`;

/** Ignores SIGINT and SIGTERM everywhere, and leaves the group twice: setsid, and setsid + orphaned. */
const STUBBORN_TREE_SCRIPT = `
trap "" INT TERM
sleep 30 &
sleep 30 &
setsid sleep 30 &
( setsid sleep 30 & )
echo ready
wait`;

export function runSandboxContract(name: string, setup: () => Promise<ContractFixture>): void {
  describe(`sandbox provider contract: ${name}`, () => {
    let fixture: ContractFixture;
    let created: SandboxHandle[] = [];
    let graceMs = DEFAULT_CONTRACT_GRACE_MS;

    const listTree = async (handle: SandboxHandle, dir: string): Promise<string[]> =>
      fixture.listTree ? fixture.listTree(handle, dir) : (await handle.exec(['sh', '-c', 'cd "$1" && find . | sort', 'list', dir])).stdout.split('\n').filter(Boolean);

    beforeEach(async () => {
      fixture = await setup();
      graceMs = fixture.killGraceMs ?? DEFAULT_CONTRACT_GRACE_MS;
      created = [];
    });

    afterEach(async () => {
      for (const handle of created) await handle.terminate().catch(() => undefined);
      await fixture.cleanup();
    });

    async function create(): Promise<SandboxHandle> {
      const handle = await fixture.provider.create(fixture.spec, fixture.createOptions);
      created.push(handle);
      return handle;
    }

    async function expectHealthy(handle: SandboxHandle, id: string): Promise<void> {
      const next = await handle.exec(['echo', 'still alive']);
      expect(next).toMatchObject({ exitCode: 0, stdout: 'still alive\n', timedOut: false, cancelled: false });
      expect(handle.id).toBe(id);
      expect(await handle.poll()).toEqual({ state: 'live' });
    }

    async function liveMarked(handle: SandboxHandle, nonce: string): Promise<string> {
      const found = await handle.exec(['bash', '-c', FIND_MARKED_SCRIPT, 'find-marked', nonce]);
      expect(found.exitCode).toBe(0);
      return found.stdout.trim();
    }

    it('(a) fleet-bricking scenario: a cancelled command dies, the sandbox lives and runs the next command', async () => {
      const handle = await create();
      const id = handle.id;
      expect(await handle.exec(['echo', 'ok'])).toMatchObject({ exitCode: 0, stdout: 'ok\n' });

      const abort = new AbortController();
      const watcher = outputWatcher('started');
      const running = handle.exec(['sh', '-c', 'echo started; exec sleep 30'], {
        signal: abort.signal,
        killGraceMs: graceMs,
        onOutput: watcher.onOutput,
      });
      await watcher.seen;
      const abortedAtMs = Date.now();
      abort.abort();
      const result = await running;
      expect(Date.now() - abortedAtMs).toBeLessThan(COMMAND_SLEEP_MS);
      expect(result).toMatchObject({ cancelled: true, timedOut: false });
      expect(result.exitCode).not.toBe(0);

      await expectHealthy(handle, id);
    });

    it('(a) a cancel reaches a command that floods its output, behind its output budget; the sandbox lives', async () => {
      const handle = await create();
      const id = handle.id;
      const abort = new AbortController();
      const watcher = outputWatcher('flood');
      const running = handle.exec(['sh', '-c', 'yes flood-line-of-text'], { timeoutMs: 60_000, signal: abort.signal, killGraceMs: graceMs, onOutput: watcher.onOutput });
      await watcher.seen;
      const abortedAtMs = Date.now();
      abort.abort();
      const result = await running;
      expect(result).toMatchObject({ cancelled: true, timedOut: false });
      // yes dies on the SIGINT; its end reaches the host behind at most a window of paced output,
      // which a box busy with the whole suite drains slower (2.3 s seen on Modal's local server):
      // the bound is the command's 60 s deadline's tenth, far from what an unheard cancel would take.
      expect(Date.now() - abortedAtMs).toBeLessThan(graceMs + 6_000);
      await expectHealthy(handle, id);
    });

    it('(b) a command timeout kills the command, not the sandbox', async () => {
      const handle = await create();
      const id = handle.id;
      expect(await handle.exec(['echo', 'ok'])).toMatchObject({ exitCode: 0, stdout: 'ok\n' });

      const timeoutMs = 300;
      const result = await handle.exec(['sleep', '30'], { timeoutMs, killGraceMs: graceMs });
      expect(result).toMatchObject({ timedOut: true, cancelled: false });
      expect(result.exitCode).not.toBe(0);
      expect(result.durationMs).toBeGreaterThanOrEqual(timeoutMs);
      expect(result.durationMs).toBeLessThan(COMMAND_SLEEP_MS);

      await expectHealthy(handle, id);
    });

    it('(c) a tree that ignores SIGINT/SIGTERM and escapes its group is killed entirely; the sandbox lives', async () => {
      const handle = await create();
      const id = handle.id;
      const nonce = `tree-${Date.now()}-${Math.random().toString(36).slice(2)}`;
      const abort = new AbortController();
      const watcher = outputWatcher('ready');
      const running = handle.exec(['bash', '-c', STUBBORN_TREE_SCRIPT], {
        env: { CONTRACT_TREE: nonce },
        signal: abort.signal,
        killGraceMs: graceMs,
        onOutput: watcher.onOutput,
      });
      await watcher.seen;
      // Sanity: the marker finds the tree while it runs (bash + 4 sleeps), or the final check proves nothing.
      // It runs as a second exec only after `running` ends, so look from the host side where possible.
      if (fixture.liveHostPids) {
        const before = await waitFor('tree to be visible', async () => {
          const pids = await fixture.liveHostPids!(`CONTRACT_TREE=${nonce}`);
          return pids.length >= 5 ? pids : undefined;
        });
        expect(before.length).toBeGreaterThanOrEqual(5);
      }
      const abortedAtMs = Date.now();
      abort.abort();
      const result = await running;
      expect(Date.now() - abortedAtMs).toBeLessThan(COMMAND_SLEEP_MS);
      expect(result.cancelled).toBe(true);

      await waitFor('no process of the tree left inside the sandbox', async () => (await liveMarked(handle, nonce)) === '', {
        timeoutMs: TREE_GONE_TIMEOUT_MS,
      });
      if (fixture.liveHostPids) expect(await fixture.liveHostPids(`CONTRACT_TREE=${nonce}`)).toEqual([]);
      await expectHealthy(handle, id);
    });

    it('(d) a signalled command reports 128+signal', async () => {
      const handle = await create();
      expect(await handle.exec(['sh', '-c', 'kill -TERM $$'])).toMatchObject({ exitCode: 143, timedOut: false, cancelled: false });
      expect(await handle.exec(['sh', '-c', 'kill -KILL $$'])).toMatchObject({ exitCode: 137, timedOut: false, cancelled: false });
      expect(await handle.exec(['sh', '-c', 'exit 3'])).toMatchObject({ exitCode: 3 });
    });

    it('(e) commands are serialized in submission order', async () => {
      const handle = await create();
      const dir = handle.workdir;
      // Each command records start/end times and holds a mkdir lock: overlap would show in both.
      const step = (name: string): string => `date +%s%N > ${name}.start; mkdir lock || exit 99; sleep 0.2; rmdir lock; date +%s%N > ${name}.end`;
      const results = await Promise.all(['one', 'two', 'three'].map((n) => handle.exec(['sh', '-c', step(n)], { cwd: dir })));
      for (const result of results) expect(result.exitCode).toBe(0);
      const read = async (file: string): Promise<bigint> => {
        const bytes = await handle.readFile(`${dir}/${file}`);
        expect(bytes).toBeDefined();
        return BigInt(new TextDecoder().decode(bytes).trim());
      };
      expect(await read('one.end')).toBeLessThanOrEqual(await read('two.start'));
      expect(await read('two.end')).toBeLessThanOrEqual(await read('three.start'));
    });

    it('(e) a queued command cancelled before it starts resolves at once and never runs', async () => {
      const handle = await create();
      const dir = handle.workdir;
      const first = new AbortController();
      const watcher = outputWatcher('started');
      let firstDone = false;
      const running = handle.exec(['sh', '-c', 'echo started; exec sleep 30'], { signal: first.signal, killGraceMs: graceMs, onOutput: watcher.onOutput }).finally(() => {
        firstDone = true;
      });
      const second = new AbortController();
      const queued = handle.exec(['touch', `${dir}/queued-ran`], { signal: second.signal });
      await watcher.seen;
      second.abort();
      const cancelled: ExecResult = await queued;
      expect(cancelled).toMatchObject({ cancelled: true, timedOut: false, exitCode: CANCELLED_EXIT_CODE, stdout: '', stderr: '' });
      expect(firstDone).toBe(false);
      first.abort();
      expect((await running).cancelled).toBe(true);
      expect(await handle.readFile(`${dir}/queued-ran`)).toBeUndefined();
      // An already-aborted signal never reaches the sandbox either.
      expect(await handle.exec(['touch', `${dir}/queued-ran`], { signal: AbortSignal.abort() })).toMatchObject({ cancelled: true });
      expect(await handle.readFile(`${dir}/queued-ran`)).toBeUndefined();
    });

    it('(f) env and cwd reach the command; argv is never shell-interpreted', async () => {
      const handle = await create();
      const sub = `${handle.workdir}/sub dir`;
      expect((await handle.exec(['mkdir', '-p', `${sub}/canary`])).exitCode).toBe(0);

      const envCwd = await handle.exec(['sh', '-c', 'printf "%s|%s" "$CONTRACT_VAR" "$(pwd)"'], {
        env: { CONTRACT_VAR: 'a b $HOME' },
        cwd: sub,
      });
      expect(envCwd).toMatchObject({ exitCode: 0, stdout: `a b $HOME|${sub}` });
      const defaultCwd = await handle.exec(['pwd']);
      expect(defaultCwd.stdout.trim()).toBe(handle.workdir);

      const literal = ['$(touch pwned)', '; rm -rf canary', '`touch pwned2`', '"dq" \'sq\' \\', '*', '|| touch pwned3'];
      const echoed = await handle.exec(['printf', '%s\\n', ...literal], { cwd: sub });
      expect(echoed).toMatchObject({ exitCode: 0, stdout: `${literal.join('\n')}\n` });
      const listing = await handle.exec(['ls', '-A'], { cwd: sub });
      expect(listing.stdout.split('\n').filter(Boolean)).toEqual(['canary']);
    });

    it('(g) lifecycle: poll live; terminate ends it; exec after terminate throws SandboxGoneError; terminate is idempotent', async () => {
      const handle = await create();
      expect(await handle.poll()).toEqual({ state: 'live' });
      const listed = await fixture.provider.list({ lane: fixture.spec.tags.lane, slot: fixture.spec.tags.slot });
      expect(listed.find((ref) => ref.id === handle.id)?.tags).toMatchObject(fixture.spec.tags);

      await handle.terminate();
      expect(['exited', 'missing']).toContain((await handle.poll()).state);
      await expect(handle.exec(['true'])).rejects.toBeInstanceOf(SandboxGoneError);
      await expect(handle.writeFile(`${handle.workdir}/x`, 'x')).rejects.toBeInstanceOf(SandboxGoneError);
      await handle.terminate();
      await fixture.provider.terminateById(handle.id);
      expect((await fixture.provider.list()).map((ref) => ref.id)).not.toContain(handle.id);
    });

    it('(g) terminate while a command runs ends that command with SandboxGoneError', async () => {
      const handle = await create();
      const watcher = outputWatcher('started');
      const running = handle.exec(['sh', '-c', 'echo started; exec sleep 30'], { onOutput: watcher.onOutput });
      const settled = running.then(
        () => undefined,
        (error: unknown) => error,
      );
      await watcher.seen;
      await handle.terminate();
      expect(await settled).toBeInstanceOf(SandboxGoneError);
    });

    it('(h) writeFile/readFile roundtrip; missing file reads as undefined; commands see written files', async () => {
      const handle = await create();
      const text = `${handle.workdir}/nested/dir/hello.txt`;
      await handle.writeFile(text, 'hello\n');
      expect(new TextDecoder().decode(await handle.readFile(text))).toBe('hello\n');
      expect((await handle.exec(['cat', text])).stdout).toBe('hello\n');

      const binary = new Uint8Array(256).map((_, i) => i);
      await handle.writeFile(`${handle.workdir}/bytes.bin`, binary);
      expect(await handle.readFile(`${handle.workdir}/bytes.bin`)).toEqual(binary);

      expect(await handle.readFile(`${handle.workdir}/no/such/file`)).toBeUndefined();
    });

    it('(h2) readFile takes what an agent leaves as untrusted: no link (file or directory), no FIFO or device, nothing over the cap; the sandbox stays usable', async () => {
      const handle = await create();
      const out = `${handle.workdir}/cards/c1/out`;
      const refusedAs = async (path: string, maxBytes?: number): Promise<AgentFileError> => {
        const error = await handle.readFile(path, maxBytes === undefined ? {} : { maxBytes }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(AgentFileError);
        return error as AgentFileError;
      };
      const sh = (script: string) => handle.exec(['sh', '-c', script], { cwd: handle.workdir, timeoutMs: 10_000 });
      expect((await sh(`mkdir -p ${out} && mkfifo ${out}/result.json && ln -s /dev/zero ${out}/zero.json && head -c 2000 /dev/zero > ${out}/big.json`)).exitCode).toBe(0);
      expect((await refusedAs(`${out}/result.json`)).message).toBe('result.json is a FIFO, not a regular file');
      const link = await refusedAs(`${out}/zero.json`);
      expect([link.rule, link.message]).toEqual(['link', 'zero.json is a symbolic link; lanes reads no file through a link']);
      const big = await refusedAs(`${out}/big.json`, 1_000);
      expect([big.rule, big.message]).toEqual(['too-large', 'big.json is 2,000 bytes (limit 1,000 bytes)']);
      expect(
        (await sh(`rm -rf ${out} && mkdir -p ${handle.workdir}/elsewhere && echo '{}' > ${handle.workdir}/elsewhere/result.json && ln -s ${handle.workdir}/elsewhere ${out}`))
          .exitCode,
      ).toBe(0);
      expect((await refusedAs(`${out}/result.json`)).message).toBe('result.json is under out, which is a symbolic link; lanes reads no file through a link');
      // Nothing above blocked or broke the sandbox: the next command and a plain read still work.
      expect((await sh(`rm -f ${out} && mkdir -p ${out} && echo '{"ok":true}' > ${out}/result.json`)).exitCode).toBe(0);
      expect(new TextDecoder().decode(await handle.readFile(`${out}/result.json`))).toBe('{"ok":true}\n');
    });

    it('(i) resetDirs empties directories (contents, nested trees, hidden files), makes missing ones, and leaves everything else alone', async () => {
      const handle = await create();
      const out = `${handle.workdir}/cards/c1/out`;
      const work = `${handle.workdir}/cards/c1/work`;
      await handle.writeFile(`${out}/result.json`, '{}');
      await handle.writeFile(`${work}/deep/tree/file.txt`, 'old');
      await handle.writeFile(`${handle.workdir}/cards/c1/card.json`, 'kept');
      await handle.writeFile(`${handle.workdir}/cards/c1/outside-out`, 'kept');
      // A command left a hidden file and an empty directory behind.
      expect((await handle.exec(['sh', '-c', 'touch "$1/.hidden" && mkdir -p "$1/empty/x"', 'seed', work])).exitCode).toBe(0);

      const reset = await handle.resetDirs([out, work, `${handle.workdir}/cards/c1/fresh/nested`]);
      expect(reset).toMatchObject({ exitCode: 0, timedOut: false, cancelled: false });
      expect(await listTree(handle, `${handle.workdir}/cards/c1`)).toEqual(['.', './card.json', './fresh', './fresh/nested', './out', './outside-out', './work']);
      expect(new TextDecoder().decode(await handle.readFile(`${handle.workdir}/cards/c1/card.json`))).toBe('kept');

      // A relative path is taken from the workdir, as for files.
      await handle.writeFile(`${handle.workdir}/rel/a.txt`, 'a');
      expect((await handle.resetDirs(['rel'])).exitCode).toBe(0);
      expect(await handle.readFile(`${handle.workdir}/rel/a.txt`)).toBeUndefined();
      expect((await handle.exec(['test', '-d', `${handle.workdir}/rel`])).exitCode).toBe(0);
    });

    it('(i) resetDirs removes `remove` paths in the same call without making them again; a refused removal touches nothing', async () => {
      const handle = await create();
      const cards = `${handle.workdir}/cards`;
      await handle.writeFile(`${cards}/c0/work/repo/file.txt`, 'an earlier card');
      await handle.writeFile(`${cards}/c1/out/result.json`, '{}');
      const list = () => listTree(handle, cards);

      expect(await handle.resetDirs([`${cards}/c1/out`, `${cards}/c1/work`], { remove: [`${cards}/c0`, `${cards}/never-there`] })).toMatchObject({ exitCode: 0 });
      expect(await list()).toEqual(['.', './c1', './c1/out', './c1/work']);

      await handle.writeFile(`${cards}/c1/out/result.json`, '{}');
      for (const outside of ['/tmp', handle.workdir, `${handle.workdir}/..`]) {
        await expect(handle.resetDirs([`${cards}/c2/out`], { remove: [outside] }), outside).rejects.toBeInstanceOf(ProviderInvalidError);
      }
      expect(await list()).toEqual(['.', './c1', './c1/out', './c1/out/result.json', './c1/work']);
      // Removals alone make nothing.
      expect(await handle.resetDirs([], { remove: [`${cards}/c1`] })).toMatchObject({ exitCode: 0 });
      expect(await list()).toEqual(['.']);
    });

    it('(i) resetDirs refuses the workdir itself and anything outside it, touching nothing; a dead sandbox throws SandboxGoneError', async () => {
      const handle = await create();
      await handle.writeFile(`${handle.workdir}/keep.txt`, 'kept');
      for (const path of [handle.workdir, `${handle.workdir}/`, `${handle.workdir}/..`, `${handle.workdir}/a/../../x`, '/tmp', '..', '/']) {
        await expect(handle.resetDirs([`${handle.workdir}/ok`, path]), path).rejects.toBeInstanceOf(ProviderInvalidError);
      }
      expect(new TextDecoder().decode(await handle.readFile(`${handle.workdir}/keep.txt`))).toBe('kept');
      // The valid path before the refused one was not made either: nothing is touched.
      expect((await handle.exec(['test', '-e', `${handle.workdir}/ok`])).exitCode).not.toBe(0);

      await handle.terminate();
      await expect(handle.resetDirs([`${handle.workdir}/x`])).rejects.toBeInstanceOf(SandboxGoneError);
    });

    it('health and file requests stay responsive while a long command runs', async () => {
      const handle = await create();
      const abort = new AbortController();
      const watcher = outputWatcher('started');
      const running = handle.exec(['sh', '-c', 'echo started; exec sleep 30'], { signal: abort.signal, killGraceMs: graceMs, onOutput: watcher.onOutput });
      await watcher.seen;
      let commandEnded = false;
      void running.finally(() => (commandEnded = true));
      expect(await handle.poll()).toEqual({ state: 'live' });
      await handle.writeFile(`${handle.workdir}/during.txt`, 'during');
      expect(new TextDecoder().decode(await handle.readFile(`${handle.workdir}/during.txt`))).toBe('during');
      // Answered while the command still runs: the control channel did not wait behind it.
      expect(commandEnded).toBe(false);
      abort.abort();
      await running;
    });

    it('a root killed from outside is a dead sandbox: running and later execs throw SandboxGoneError, poll → exited', async (context) => {
      if (!fixture.killRoot) {
        context.skip();
        return;
      }
      const handle = await create();
      const watcher = outputWatcher('started');
      const running = handle.exec(['sh', '-c', 'echo started; exec sleep 30'], { onOutput: watcher.onOutput });
      const settled = running.then(
        (result) => result,
        (error: unknown) => error,
      );
      await watcher.seen;
      const killedAtMs = Date.now();
      await fixture.killRoot(handle);
      const ended = await settled;
      // Reported as an error, or as the command's own status (rule 1): then a poll says it died.
      const how = ended instanceof SandboxGoneError ? 'gone' : (ended as ExecResult).exitCode;
      expect(fixture.commandEndsOnDeath ?? ['gone']).toContain(how);
      if (how !== 'gone') expect(ended).toMatchObject({ timedOut: false, cancelled: false });
      expect(Date.now() - killedAtMs).toBeLessThan(COMMAND_SLEEP_MS);
      await expect(handle.exec(['echo', 'hi'])).rejects.toBeInstanceOf(SandboxGoneError);
      const polled = await handle.poll();
      expect(polled.state).toBe('exited');
    });
  });
}
