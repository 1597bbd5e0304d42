import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxGoneError, agentLimits } from '@lanes/contracts';
import { LocalSandboxProvider, detectIsolation, probeSeparateUid, sandboxMembers, type SandboxHandle } from '@lanes/sandbox';
import { DEFAULT_AGENT_UID_BASE, leaseUid, releaseUid } from '../src/local/separate-uid.js';
import { TEST_KILL_GRACE_MS, testSpec } from './support/local-fixture.js';
import { waitFor } from './support/wait-for.js';

/** lanes' own files: the repository this test runs from. */
const PROJECT_DIR = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
const parent = mkdtempSync(join(tmpdir(), 'lanes-uid-'));
// Agent uids must pass through every directory above their sandbox (mkdtemp makes it 0700).
chmodSync(parent, 0o711);
const baseDir = join(parent, 'sandboxes');
const probe = probeSeparateUid(baseDir);
if (!probe.ok) console.warn(`separate-uid tests skipped: ${probe.why}`);

describe.runIf(probe.ok && detectIsolation() === 'pid-namespace')('local provider (separate-uid): an agent reaches nothing of the worker or the other slots', () => {
  let provider: LocalSandboxProvider;
  let a: SandboxHandle;
  let b: SandboxHandle;
  const sh = (h: SandboxHandle, script: string, cwd?: string) => h.exec(['sh', '-c', script], { timeoutMs: 10_000, ...(cwd ? { cwd } : {}) });
  const cardDirs = (h: SandboxHandle, card: string) => [`${h.workdir}/cards/${card}/out`, `${h.workdir}/cards/${card}/work`];

  beforeAll(async () => {
    provider = new LocalSandboxProvider({ baseDir, isolation: 'separate-uid', killGraceMs: TEST_KILL_GRACE_MS });
    [a, b] = await Promise.all([provider.create(testSpec('a')), provider.create(testSpec('b'))]);
    for (const [h, card] of [
      [a, 'card-a'],
      [b, 'card-b'],
    ] as const) {
      expect((await h.resetDirs(cardDirs(h, card))).exitCode).toBe(0);
      await h.writeFile(`${h.workdir}/cards/${card}/card.json`, '{"prompt":"private to this tenant"}');
    }
  });
  afterAll(async () => {
    await a?.terminate();
    await b?.terminate();
    await provider?.close();
    rmSync(parent, { recursive: true, force: true });
  });

  it('runs each sandbox as an unprivileged uid of its own, in its own PID namespace', async () => {
    const ids = await Promise.all([a, b].map(async (h) => (await sh(h, 'id -u; id -G; ls /proc | grep -c "^[0-9]"')).stdout.trim().split('\n')));
    const [uidA, groupsA, procsA] = ids[0]!;
    const [uidB] = ids[1]!;
    expect(Number(uidA)).toBeGreaterThanOrEqual(200_000);
    expect(uidA).not.toBe(uidB);
    expect(groupsA).toBe(uidA); // no supplementary groups: not root's, not the worker's
    expect(Number(procsA)).toBeLessThan(10); // its own processes only, not the host's hundreds
  });

  it('holds the agent to SANDBOX_MAX_PROCESSES processes and threads, a limit it cannot raise', async () => {
    const limits = await sh(a, `grep "^Max processes" /proc/self/limits; ulimit -H -p ${agentLimits.SANDBOX_MAX_PROCESSES + 1} 2>/dev/null || echo RAISE-REFUSED`);
    expect(limits.stdout).toMatch(new RegExp(`^Max processes +${agentLimits.SANDBOX_MAX_PROCESSES} +${agentLimits.SANDBOX_MAX_PROCESSES} +processes`));
    expect(limits.stdout).toContain('RAISE-REFUSED');
  });

  it("cannot read another slot's card or output, nor write into its directory", async () => {
    const other = `${b.workdir}/cards/card-b`;
    const tries = await sh(
      a,
      [
        `cat ${other}/card.json && echo READ-CARD`,
        `ls ${other}/out && echo LISTED-OUT`,
        `ls ${b.workdir} && echo LISTED-WORKDIR`,
        `touch ${other}/out/planted && echo WROTE-OUT`,
        `touch ${b.workdir}/planted && echo WROTE-WORKDIR`,
        `ls ${baseDir} && echo LISTED-BASE`,
      ].join('; '),
      `${a.workdir}/cards/card-a/work`,
    );
    expect(tries.stdout).not.toMatch(/READ-CARD|LISTED-OUT|LISTED-WORKDIR|WROTE-OUT|WROTE-WORKDIR|LISTED-BASE/);
    expect(tries.stderr).toMatch(/Permission denied/);
    expect(existsSync(`${other}/out/planted`)).toBe(false);
  });

  it("cannot see the worker's process or environment, nor write into lanes' own files or move lanes' card tree", async () => {
    const probeScript = [
      `cat /proc/${process.pid}/environ && echo READ-WORKER-ENV`,
      `grep -l REDIS_URL /proc/[0-9]*/environ 2>/dev/null && echo FOUND-STACK-ENV`,
      `touch ${PROJECT_DIR}/pwned-by-agent && echo WROTE-PROJECT`,
      `touch ${baseDir}/pwned && echo WROTE-BASE`,
      `echo '{}' > ${a.workdir}/../sandbox.json && echo WROTE-RECORD`,
      `mv ${a.workdir}/cards ${a.workdir}/moved && echo MOVED-CARDS`,
      `rm -rf ${a.workdir}/cards && echo REMOVED-CARDS`,
    ].join('; ');
    const tries = await sh(a, probeScript, `${a.workdir}/cards/card-a/work`);
    expect(tries.stdout).not.toMatch(/READ-WORKER-ENV|FOUND-STACK-ENV|WROTE-PROJECT|WROTE-BASE|WROTE-RECORD|MOVED-CARDS|REMOVED-CARDS/);
    expect(existsSync(join(PROJECT_DIR, 'pwned-by-agent'))).toBe(false);
  });

  it('works its own card: writes its output and work directories, HOME, TMPDIR and the workdir, and lanes reads its result', async () => {
    const work = `${a.workdir}/cards/card-a/work`;
    const run = await sh(a, `cat ../card.json >/dev/null && touch "$HOME/h" "$TMPDIR/t" file ${a.workdir}/synced && printf '{"ok":true}' > ../out/result.json`, work);
    expect(run).toMatchObject({ exitCode: 0, stderr: '' });
    expect(new TextDecoder().decode(await a.readFile(`${a.workdir}/cards/card-a/out/result.json`))).toBe('{"ok":true}');
    // A reset of the next card hands its directories to the same uid.
    expect((await a.resetDirs(cardDirs(a, 'card-a2'), { remove: [`${a.workdir}/cards/card-a`] })).exitCode).toBe(0);
    expect((await sh(a, 'touch ../out/x', `${a.workdir}/cards/card-a2/work`)).exitCode).toBe(0);
  });

  it("releases the sandbox's uid when it ends, so the uid can be leased again", async () => {
    const c = await provider.create(testSpec('c'));
    const leases = () => readdirSync(join(baseDir, '.uids'));
    expect(leases()).toHaveLength(3);
    await c.terminate();
    expect(leases()).toHaveLength(2);
  });

  it("a supervisor's terminateById (another process's provider on the same directory) releases the reaped sandbox's uid", async () => {
    const d = await provider.create(testSpec('d'));
    const reaper = new LocalSandboxProvider({ baseDir, isolation: 'separate-uid' });
    const leases = () => readdirSync(join(baseDir, '.uids'));
    expect(leases()).toHaveLength(3);
    await reaper.terminateById(d.id);
    expect(leases()).toHaveLength(2);
    await reaper.close();
  });
});

/**
 * A fork bomb that keeps its places: a leader that starts a refiller (a node that starts sleepers
 * every millisecond, whatever fails) and leaves, as `:(){ :|:& };:` never lets a freed place go.
 */
const REFILL =
  "const { spawn } = require('node:child_process'); setInterval(() => { for (let i = 0; i < 20; i++) { try { spawn('sleep', ['60'], { stdio: 'ignore' }).on('error', () => {}); } catch {} } }, 1);";
const BOMB = `require('node:child_process').spawn(process.execPath, ['-e', ${JSON.stringify(REFILL)}], { detached: true, stdio: 'ignore' }).unref(); setTimeout(() => process.exit(0), 300);`;

describe.runIf(probe.ok && detectIsolation() === 'pid-namespace')('local provider (separate-uid): a fork bomb stops at the process cap', () => {
  it('holds the bomb to agentMaxProcesses tasks; the next command finds no place and the sandbox ends as dead (126), and a new one runs', async () => {
    const cap = 64;
    const provider = new LocalSandboxProvider({ baseDir, isolation: 'separate-uid', killGraceMs: TEST_KILL_GRACE_MS, agentMaxProcesses: cap });
    const h = await provider.create(testSpec('bomb'));
    // Tasks (processes and threads) of the sandbox's members; its root (unshare, root's) is one of them.
    const tasks = () =>
      sandboxMembers(h.id).reduce((n, pid) => {
        try {
          return n + Number(/Threads:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
        } catch {
          return n;
        }
      }, 0);
    try {
      expect((await h.exec([process.execPath, '-e', BOMB], { timeoutMs: 20_000 })).exitCode).toBe(0);
      await waitFor('the bomb at the cap', () => tasks() >= cap);
      expect(tasks()).toBeLessThanOrEqual(cap + 1);
      // Every place is held: the next command cannot start, and the init ends the sandbox saying why.
      const next = await h.exec(['echo', 'ok'], { timeoutMs: 10_000 }).catch((err: unknown) => err);
      expect(next).toBeInstanceOf(SandboxGoneError);
      expect(String(next)).toContain('process cap');
      expect(await h.poll()).toEqual({ state: 'exited', exitCode: 126 });
      const fresh = await provider.create(testSpec('bomb'));
      expect((await fresh.exec(['echo', 'ok'], { timeoutMs: 10_000 })).stdout).toBe('ok\n');
      await fresh.terminate();
    } finally {
      await h.terminate();
      await provider.close();
    }
  });
});

describe('agent uid leases', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lanes-uid-leases-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const first = () => 0;

  it('takes a free uid, passes over one a live sandbox holds, and takes over one whose sandbox is gone', () => {
    const live = new Set(['a', 'b']);
    const isLive = (holder: string) => live.has(holder);
    expect(leaseUid(dir, 'a', isLive, first)).toBe(DEFAULT_AGENT_UID_BASE);
    expect(leaseUid(dir, 'b', isLive, first)).toBe(DEFAULT_AGENT_UID_BASE + 1);
    live.delete('a');
    expect(leaseUid(dir, 'c', isLive, first)).toBe(DEFAULT_AGENT_UID_BASE);
    expect(readFileSync(join(dir, '.uids', String(DEFAULT_AGENT_UID_BASE)), 'utf8')).toBe('c');
  });

  it("releases only its own lease: a sandbox that lost its uid to a takeover does not free the new holder's", () => {
    releaseUid(dir, DEFAULT_AGENT_UID_BASE, 'a');
    expect(existsSync(join(dir, '.uids', String(DEFAULT_AGENT_UID_BASE)))).toBe(true);
    releaseUid(dir, DEFAULT_AGENT_UID_BASE, 'c');
    expect(existsSync(join(dir, '.uids', String(DEFAULT_AGENT_UID_BASE)))).toBe(false);
  });
});

describe('an explicit separate-uid the machine cannot do', () => {
  it.runIf(process.getuid?.() === 0)('is refused at create naming why, before anything is made; auto says which mode it took instead', async () => {
    const closed = mkdtempSync(join(tmpdir(), 'lanes-uid-refused-'));
    chmodSync(closed, 0o700);
    const sandboxes = join(closed, 'inner', 'sandboxes');
    try {
      const explicit = new LocalSandboxProvider({ baseDir: sandboxes, isolation: 'separate-uid' });
      await expect(explicit.create(testSpec('x'))).rejects.toThrow(/isolation separate-uid is not possible here: .* is not passable by other users/);
      expect(existsSync(sandboxes)).toBe(false);
      const auto = new LocalSandboxProvider({ baseDir: sandboxes });
      expect(auto.isolationChoice).toEqual({ mode: detectIsolation(), why: expect.stringContaining('is not passable by other users') });
    } finally {
      rmSync(closed, { recursive: true, force: true });
    }
  });
});

describe('probeSeparateUid', () => {
  it.runIf(process.getuid?.() === 0)('says why when a directory above the sandboxes is closed to other users', () => {
    const closed = mkdtempSync(join(tmpdir(), 'lanes-uid-closed-'));
    chmodSync(closed, 0o700);
    try {
      const result = probeSeparateUid(join(closed, 'inner', 'sandboxes'));
      expect(result).toEqual({ ok: false, why: expect.stringContaining(`${closed} is not passable by other users`) });
    } finally {
      rmSync(closed, { recursive: true, force: true });
    }
  });

  // setpriv's own exec still holds root's capabilities, so a node under a root-only directory (npx's
  // node@26 under /root) ran there, while the sandbox's init, started through sh, could not.
  it.runIf(process.getuid?.() === 0)('says why when the node that runs the init sits under a directory only root may enter', () => {
    const closed = mkdtempSync(join(tmpdir(), 'lanes-uid-node-'));
    chmodSync(closed, 0o700);
    try {
      symlinkSync(process.execPath, join(closed, 'node'));
      const result = probeSeparateUid(join(tmpdir(), 'lanes-uid-node-probe'), join(closed, 'node'));
      expect(result).toEqual({ ok: false, why: expect.stringContaining('does not run as an unprivileged uid') });
    } finally {
      rmSync(closed, { recursive: true, force: true });
    }
  });

  it.runIf(process.getuid?.() !== 0)('says a worker that is not root cannot', () => {
    expect(probeSeparateUid(join(tmpdir(), 'x'))).toEqual({ ok: false, why: expect.stringContaining('not root') });
  });
});
