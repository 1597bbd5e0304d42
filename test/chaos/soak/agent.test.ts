import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { probeSeparateUid } from '@lanes/sandbox';
import { concurrentCards, readLedger, type LedgerRecord } from './ledger.js';

const AGENT_PATH = join(dirname(fileURLToPath(import.meta.url)), 'agent.mjs');

/**
 * The soak agent's concurrency detector (agent.mjs), on its own: real agent processes of one card,
 * one ledger and one runs directory, as the soak's lanes would start them.
 */
describe('soak agent: the socket-based concurrency detector', () => {
  let dir: string;
  let ledger: string;
  let runsDir: string;
  /** The agent, copied beside the ledger: a checkout may sit where another uid cannot reach it (mktemp -d is 0700). */
  let agentPath: string;
  const children: ChildProcess[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'lanes-soak-agent-'));
    ledger = join(dir, 'ledger.jsonl');
    runsDir = join(dir, 'runs');
    mkdirSync(runsDir);
    // As the soak's topology makes them: open to the agent's uid, whichever it is.
    chmodSync(dir, 0o755);
    chmodSync(runsDir, 0o777);
    writeFileSync(ledger, '');
    chmodSync(ledger, 0o666);
    agentPath = join(dir, 'agent.mjs');
    copyFileSync(AGENT_PATH, agentPath);
    chmodSync(agentPath, 0o644);
  });
  afterEach(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    children.length = 0;
    rmSync(dir, { recursive: true, force: true });
  });

  /** Starts one run of `card` that works `workMs`; resolves once its `start` record is in the ledger (it is listening by then). */
  async function run(card: string, sandbox: string, workMs: number, uid?: number): Promise<{ child: ChildProcess; exited: Promise<number | null>; id: string }> {
    const cardFile = join(dir, `${sandbox}.json`);
    writeFileSync(cardFile, JSON.stringify({ id: card, metadata: { workMs } }));
    const child = spawn(process.execPath, [agentPath], {
      env: { PATH: process.env.PATH, SOAK_LEDGER: ledger, SOAK_RUNS_DIR: runsDir, LANES_CARD_ID: card, LANES_SANDBOX_ID: sandbox, LANES_ATTEMPT: '1', LANES_CARD_FILE: cardFile },
      stdio: 'ignore',
      ...(uid !== undefined ? { uid, gid: uid } : {}),
    });
    children.push(child);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const started = () => records().find((r) => r.type === 'start' && r.sandbox === sandbox);
    await until(() => {
      if (child.exitCode !== null) throw new Error(`agent in ${sandbox} exited ${child.exitCode} before it started`);
      return started() !== undefined;
    });
    return { child, exited, id: started()!.run };
  }
  const records = (): LedgerRecord[] => readLedger(ledger).records;
  async function until(ok: () => boolean): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  const met = () => records().filter((r) => r.type === 'concurrent');

  it('records two overlapping runs of a card: the later one meets the earlier one alive, before and after its work', async () => {
    const a = await run('c1', 'sb-a', 3_000);
    const b = await run('c1', 'sb-b', 100);
    expect(await b.exited).toBe(0);
    const other = expect.objectContaining({ run: a.id, sandbox: 'sb-a' });
    expect(met()).toEqual([
      expect.objectContaining({ type: 'concurrent', card: 'c1', run: b.id, sandbox: 'sb-b', phase: 'start', other }),
      expect.objectContaining({ type: 'concurrent', card: 'c1', run: b.id, sandbox: 'sb-b', phase: 'end', other }),
    ]);
    a.child.kill('SIGKILL');
    expect(concurrentCards(records()).has('c1')).toBe(true);
  });

  it('records the overlap even when the first run is SIGKILLed and never writes its end', async () => {
    const a = await run('c1', 'sb-a', 3_000);
    const b = await run('c1', 'sb-b', 1_000);
    // b scans right after its start record; a dies once b has met it (before, their work would not overlap).
    await until(() => met().length > 0);
    a.child.kill('SIGKILL');
    await a.exited;
    expect(await b.exited).toBe(0);
    // Intervals alone cannot see it (a has no end); the meeting is the proof.
    expect(
      records()
        .filter((r) => r.type === 'end')
        .map((r) => r.sandbox),
    ).toEqual(['sb-b']);
    expect(met().map((r) => [r.run, r.type === 'concurrent' && r.other.run])).toEqual([[b.id, a.id]]);
    expect(concurrentCards(records()).has('c1')).toBe(true);
  });

  it('records a stopped run (SIGSTOP: it cannot answer) as alive', async () => {
    const a = await run('c1', 'sb-a', 3_000);
    a.child.kill('SIGSTOP');
    try {
      const b = await run('c1', 'sb-b', 100);
      expect(await b.exited).toBe(0);
      const unanswered = expect.objectContaining({ unanswered: true });
      expect(met()).toEqual([expect.objectContaining({ run: b.id, phase: 'start', other: unanswered }), expect.objectContaining({ run: b.id, phase: 'end', other: unanswered })]);
    } finally {
      a.child.kill('SIGKILL');
    }
  });

  it('records none for runs one after another, nor for a run after a SIGKILLed one whose socket was left behind', async () => {
    const a = await run('c1', 'sb-a', 100);
    expect(await a.exited).toBe(0);
    const b = await run('c1', 'sb-b', 3_000);
    b.child.kill('SIGKILL');
    await b.exited;
    // A SIGKILLed run cannot remove its socket: the next run must find nobody listening there.
    expect(readdirSync(join(runsDir, 'c1'))).toEqual([`${b.id}.sock`]);
    const c = await run('c1', 'sb-c', 100);
    expect(await c.exited).toBe(0);
    expect(met()).toEqual([]);
    expect(records().map((r) => `${r.type} ${r.sandbox}`)).toEqual(['start sb-a', 'end sb-a', 'start sb-b', 'start sb-c', 'end sb-c']);
    expect(concurrentCards(records()).has('c1')).toBe(false);
    // …and it cleared the dead run's socket, and its own.
    expect(existsSync(join(runsDir, 'c1', `${b.id}.sock`))).toBe(false);
    expect(readdirSync(join(runsDir, 'c1'))).toEqual([]);
  });

  // A local lane on a root machine runs each sandbox as its own uid (separate-uid isolation), where
  // this node can run as another uid at all (not one under a root-only directory, as npx's node@26).
  it.runIf(probeSeparateUid(join(tmpdir(), 'lanes-soak-agent-probe')).ok)(
    'records the overlap between runs of different uids, and a later run of a third uid removes the dead ones',
    async () => {
      const a = await run('c1', 'sb-a', 3_000, 65_533);
      const b = await run('c1', 'sb-b', 100, 65_534);
      expect(await b.exited).toBe(0);
      expect(met().map((r) => [r.run, r.type === 'concurrent' && r.other.run])).toEqual([
        [b.id, a.id],
        [b.id, a.id],
      ]);
      a.child.kill('SIGKILL');
      await a.exited;
      const c = await run('c1', 'sb-c', 100, 65_532);
      expect(await c.exited).toBe(0);
      expect(met()).toHaveLength(2);
      expect(readdirSync(join(runsDir, 'c1'))).toEqual([]);
    },
  );

  it('records none for overlapping runs of different cards', async () => {
    const a = await run('c1', 'sb-a', 1_000);
    const b = await run('c2', 'sb-b', 100);
    expect(await b.exited).toBe(0);
    expect(await a.exited).toBe(0);
    expect(met()).toEqual([]);
  });
});
