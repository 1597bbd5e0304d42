import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_DIR } from '@lanes/cli';
import { agentLimits, type CardRecord, type LaneIsolation } from '@lanes/contracts';
import { detectIsolation, probeSeparateUid } from '@lanes/sandbox';
import { Redis } from 'ioredis';
import { EventLog } from '@lanes/queue';
import { apiClient, freePort, startRedis, waitFor, type ApiClient, type TestRedis } from '../harness/index.js';

/**
 * Agents are untrusted code (issue 23, README "Threat model"). Each attack runs through a real
 * `lanes up` started with API tokens (admin and a board's), callback secrets (the stack's and a
 * lane's) and REDIS_URL, in every isolation mode this machine allows (process-group forced by config
 * as well). Throughout: /healthz answers within 1 s,
 * the stack's memory stays put, every attacked card ends as specified with a reason naming the file
 * and the rule, no secret of the stack reaches the agent or any card, event, callback or log line,
 * and an ordinary card afterwards ends done in the same slot.
 */
const BIN = join(PROJECT_DIR, 'apps/cli/bin/lanes.js');
const TOKEN = 'tok-hostile-3f9a1c7e5b2d';
const CALLBACK_SECRET = 'cb-hostile-secret-8e1d4c2b9a7f';
/** The hostile lane's own callback secret and its board's scoped token, each in a variable the config names. */
const LANE_CALLBACK_SECRET = 'cb-lane-hostile-5d2e9f1a0c3b';
const BOARD_TOKEN = 'tok-board-hostile-7c1e4a9d2f6b';
/** The agent: what it does comes from its card's metadata, as a model steered by card text would. */
const AGENT = `
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
const card = JSON.parse(readFileSync(process.env.LANES_CARD_FILE, 'utf8'));
const m = card.metadata ?? {};
const out = process.env.LANES_OUTPUT_DIR;
const sh = (script) => execFileSync('sh', ['-c', script], { stdio: 'inherit' });
const tryIt = (fn) => { try { fn(); return true; } catch { return false; } };
switch (m.attack) {
  case 'fifo': sh('mkfifo "$LANES_OUTPUT_DIR/result.json"'); process.exit(0);
  case 'dev-zero': sh('ln -s /dev/zero "$LANES_OUTPUT_DIR/result.json"'); process.exit(0);
  case 'environ-link': sh('ln -s /proc/self/environ "$LANES_OUTPUT_DIR/blocked.json"'); process.exit(75);
  case 'big-result': writeFileSync(out + '/result.json', Buffer.alloc(40_000_000, 0x20)); process.exit(0);
  case 'big-reason': writeFileSync(out + '/blocked.json', JSON.stringify({ reason: 'r'.repeat(16 * 1024 * 1024) })); process.exit(75);
  case 'huge-line': process.stdout.write('x'.repeat(16 * 1024 * 1024) + '\\n', () => process.exit(75)); break;
  case 'daemon': sh('env -i setsid sleep ' + m.duration + ' > /dev/null 2>&1 &'); writeFileSync(out + '/result.json', JSON.stringify({ left: true })); process.exit(0);
  case 'flood': sh('timeout 3 yes flood-line-of-text || true'); writeFileSync(out + '/result.json', JSON.stringify({ flooded: true })); process.exit(0);
  case 'env-dump': writeFileSync(out + '/result.json', JSON.stringify({ env: process.env })); process.exit(0);
  case 'proc-scan': {
    const found = [];
    for (const pid of readdirSync('/proc').filter((p) => /^\\d+$/.test(p))) {
      let text = '';
      try { text = readFileSync('/proc/' + pid + '/environ', 'latin1'); } catch { continue; }
      // What an attacker knows: the names of the stack's settings, never their values.
      for (const name of ['REDIS_URL=', 'LANES_API_TOKENS=', 'LANES_CALLBACK_SECRET=', 'HOSTILE_CALLBACK_SECRET=', 'HOSTILE_BOARD_TOKEN=']) if (text.includes(name)) found.push(pid + ':' + name);
    }
    writeFileSync(out + '/result.json', JSON.stringify({ found }));
    process.exit(0);
  }
  case 'trespass': {
    const wrote = {
      otherSlot: tryIt(() => writeFileSync(m.otherWorkdir + '/planted', 'x')),
      otherSlotRead: tryIt(() => readdirSync(m.otherWorkdir)),
      lanesOwn: tryIt(() => writeFileSync(m.lanesDir + '/planted-by-agent', 'x')),
      record: tryIt(() => writeFileSync(m.record, '{}')),
    };
    writeFileSync(out + '/result.json', JSON.stringify(wrote));
    process.exit(0);
  }
  default: writeFileSync(out + '/result.json', JSON.stringify({ ordinary: true })); process.exit(0);
}
`;

type Mode = 'separate-uid' | 'pid-namespace' | 'process-group';
const scratch = mkdtempSync(join(tmpdir(), 'lanes-hostile-'));
// The agent and its sandboxes live where an agent uid may pass (mkdtemp makes 0700).
chmodSync(scratch, 0o755);
const modes: Mode[] = [
  ...(detectIsolation() === 'pid-namespace' && probeSeparateUid(join(scratch, 'probe')).ok ? (['separate-uid'] as const) : []),
  ...(detectIsolation() === 'pid-namespace' ? (['pid-namespace'] as const) : []),
  'process-group',
];

describe.each(modes)('hostile agents through a real `lanes up` (%s)', (mode) => {
  let redis: TestRedis;
  let dir: string;
  let child: ChildProcess | undefined;
  let api: ApiClient;
  let url: string;
  let receiver: Server;
  const callbacks: string[] = [];
  const output: string[] = [];
  let healthWorstMs = 0;
  /** Probes that got no 200 (an error, a refused connection, a timeout): a stack that crashed answers fast, and must not pass. */
  const healthFailures: string[] = [];
  let healthProbes = 0;
  let rssBaseKb = 0;
  let rssWorstKb = 0;
  let sampler: NodeJS.Timeout | undefined;
  let secrets: string[];
  let n = 0;
  const posted: string[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(scratch, `${mode}-`));
    chmodSync(dir, 0o755);
    writeFileSync(join(dir, 'agent.mjs'), AGENT, { mode: 0o644 });
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        callbacks.push(body);
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const config = join(dir, 'lanes.json');
    writeFileSync(
      config,
      JSON.stringify({
        // One slot, so "the same slot runs the next card" is checked, not hoped for; the neighbour is
        // another slot (another lane's) whose directories the agent tries to reach.
        lanes: ['hostile', 'neighbour'].map((name) => ({
          name,
          slots: 1,
          isolation: mode,
          attempts: 1,
          agent: [process.execPath, join(dir, 'agent.mjs')],
          respawn: { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 },
          ...(name === 'hostile' ? { callbackSecret: { fromEnv: 'HOSTILE_CALLBACK_SECRET' } } : {}),
        })),
        tokens: [{ name: 'hostile-board', fromEnv: 'HOSTILE_BOARD_TOKEN', lanes: ['hostile'], role: 'write' }],
      }),
    );
    const port = await freePort();
    secrets = [TOKEN, CALLBACK_SECRET, LANE_CALLBACK_SECRET, BOARD_TOKEN, redis.url];
    child = spawn(process.execPath, [BIN, 'up', '--config', config, '--port', String(port)], {
      cwd: dir,
      env: {
        ...process.env,
        LANES_API_TOKENS: TOKEN,
        LANES_CALLBACK_SECRET: CALLBACK_SECRET,
        HOSTILE_CALLBACK_SECRET: LANE_CALLBACK_SECRET,
        HOSTILE_BOARD_TOKEN: BOARD_TOKEN,
        REDIS_URL: redis.url,
        LANES_SANDBOX_DIR: join(dir, 'sandboxes'),
        LANES_CALLBACK_ALLOW: '127.0.0.1',
        LANES_LOG_FORMAT: 'json',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
    child.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
    url = `http://127.0.0.1:${port}`;
    api = apiClient(url, TOKEN);
    await waitFor('lanes up to answer', async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.ok);
    await waitFor('both slots live', async () => (await api.lanes()).flatMap((l) => l.slots).filter((s) => s.sandbox?.state === 'live').length === 2);
    rssBaseKb = rssKb(child.pid!);
    // /healthz and the stack's memory, sampled through every attack.
    let probing = false;
    sampler = setInterval(() => {
      rssWorstKb = Math.max(rssWorstKb, rssKb(child!.pid!));
      if (probing) return;
      probing = true;
      const started = performance.now();
      void fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5_000) })
        .then(
          (res) => {
            healthProbes++;
            if (res.status !== 200) healthFailures.push(`status ${res.status}`);
          },
          (err: unknown) => {
            healthProbes++;
            healthFailures.push(err instanceof Error ? err.message : String(err));
          },
        )
        .finally(() => {
          healthWorstMs = Math.max(healthWorstMs, performance.now() - started);
          probing = false;
        });
    }, 50);
  }, 60_000);

  afterAll(async () => {
    if (sampler) clearInterval(sampler);
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    await new Promise((r) => receiver?.close(r));
    await redis?.stop();
    rmSync(join(PROJECT_DIR, 'planted-by-agent'), { force: true });
  });

  /** Posts a card with the attack in its metadata (and a callback), and waits for it to end. */
  const attack = async (attackName: string, extra: Record<string, unknown> = {}): Promise<CardRecord> => {
    const id = `${mode}-${attackName}-${n++}`;
    posted.push(id);
    const callbackUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/cb`;
    const answer = await api.request('POST', '/v1/cards', { id, lane: 'hostile', title: attackName, callbackUrl, metadata: { attack: attackName, ...extra } });
    expect(answer.status, answer.text).toBe(202);
    return api.waitCard(id, 'ended', (c) => ['done', 'failed', 'cancelled', 'blocked'].includes(c.state), 90_000);
  };
  const lastMessage = (c: CardRecord) => c.history.at(-1)?.message;

  it('says at boot, in GET /v1/lanes, how the lane fences its agents', async () => {
    const isolation = (await api.lanes()).find((l) => l.name === 'hostile')!.isolation as LaneIsolation;
    expect(isolation.mode).toBe(mode);
    expect(isolation.trustedAgentsOnly).toBe(mode !== 'separate-uid');
    const boot = output
      .join('')
      .split('\n')
      .find((l) => l.includes('"event":"lane.isolation"'));
    expect(boot, 'the boot log line').toBeDefined();
    if (mode !== 'separate-uid') expect(boot).toContain('TRUSTED AGENTS ONLY');
  });

  it.each([
    ['fifo', 'result.json is a FIFO, not a regular file'],
    ['dev-zero', 'result.json is a symbolic link; lanes reads no file through a link'],
    ['environ-link', 'blocked.json is a symbolic link; lanes reads no file through a link'],
    ['big-result', 'result.json is 40,000,000 bytes (limit 1,048,576 bytes)'],
    ['big-reason', /^blocked\.json is 16,777,2\d\d bytes \(limit 1,048,576 bytes\)$/],
  ])('%s: the card fails naming the file and the rule, and the same slot runs the next card', async (name, message) => {
    const card = await attack(name);
    expect(card.state).toBe('failed');
    // The history's message is "attempt 1 failed: <why>".
    if (typeof message === 'string') expect(lastMessage(card)).toBe(`attempt 1 failed: ${message}`);
    else expect(lastMessage(card)?.replace('attempt 1 failed: ', '')).toMatch(message);
    expect(card.result).toBeUndefined();
    const next = await attack('ordinary');
    expect(next.state).toBe('done');
    expect(next.result).toEqual({ ordinary: true });
    // The same slot, on the same sandbox: the attack cost the agent its card, not the slot its sandbox.
    expect(next.sandboxId).toBe(card.sandboxId);
  });

  it('a 16 MiB last line with exit 75 is needs-human, its reason capped', async () => {
    const card = await attack('huge-line');
    expect(card).toMatchObject({ state: 'blocked', blockedReason: 'needs-human' });
    expect(card.blockedMessage?.length).toBeLessThanOrEqual(agentLimits.MAX_BLOCK_REASON_CHARS);
  });

  it('printing as fast as it can for 3 s is read at the output rate, and the card ends done with its result', async () => {
    const card = await attack('flood');
    expect(card).toMatchObject({ state: 'done', result: { flooded: true } });
  });

  it('a daemon the agent leaves behind (its own session, no environment) is gone once the card is done', async () => {
    // A unique sleep, seen from the host by its command line: it carries no marker of the sandbox.
    const duration = `300.${process.pid}${n}`;
    const card = await attack('daemon', { duration });
    expect(card).toMatchObject({ state: 'done', result: { left: true } });
    const left = readdirSync('/proc').filter((pid) => /^\d+$/.test(pid) && readCmdline(pid) === `sleep\0${duration}\0`);
    if (mode !== 'process-group') {
      expect(left).toEqual([]);
      return;
    }
    // In a process group the init finds what it ends by the sandbox's mark, which this daemon dropped
    // (a trusted-agents-only mode, as the lane says): it is still there, and the test ends it.
    expect(left).toHaveLength(1);
    for (const pid of left) process.kill(Number(pid), 'SIGKILL');
  });

  it("an env dump holds only the allow-list, the card's variables and the lane's: no secret of the stack", async () => {
    const card = await attack('env-dump');
    expect(card.state).toBe('done');
    const env = (card.result as { env: Record<string, string> }).env;
    for (const secret of secrets) expect(JSON.stringify(env)).not.toContain(secret);
    const unexpected = Object.keys(env).filter((k) => !/^(LANES_|PATH$|HOME$|USER$|LOGNAME$|SHELL$|LANG|LC_|TZ$|TERM$|TMPDIR$|PWD$|SHLVL$|_$|OLDPWD$|TRACEPARENT$)/.test(k));
    expect(unexpected).toEqual([]);
  });

  it('a /proc scan for the stack secrets finds none, unless the lane says it runs trusted agents only', async () => {
    const card = await attack('proc-scan');
    expect(card.state).toBe('done');
    const found = (card.result as { found: string[] }).found;
    // In a PID namespace the worker is not in the agent's /proc; in a process group it is, as the
    // lane's isolation says (trusted agents only). The test states what holds in each mode.
    if (mode === 'process-group') expect((await api.lanes()).find((l) => l.name === 'hostile')!.isolation?.trustedAgentsOnly).toBe(true);
    else expect(found).toEqual([]);
  });

  it.runIf(mode === 'separate-uid')("cannot write into another slot's directory or lanes' own, nor rewrite a sandbox record", async () => {
    const other = (await api.lanes()).find((l) => l.name === 'neighbour')!.slots[0]!.sandbox!.id;
    const card = await attack('trespass', {
      otherWorkdir: join(dir, 'sandboxes', other, 'work'),
      lanesDir: PROJECT_DIR,
      record: join(dir, 'sandboxes', other, 'sandbox.json'),
    });
    expect(card.state).toBe('done');
    expect(card.result).toEqual({ otherSlot: false, otherSlotRead: false, lanesOwn: false, record: false });
    expect(existsSync(join(PROJECT_DIR, 'planted-by-agent'))).toBe(false);
  });

  it('through every attack: /healthz within 1 s, memory growth under 100 MB, and no secret in any card, event, callback or log line', async () => {
    console.info(`hostile agents (${mode}): /healthz worst ${healthWorstMs.toFixed(1)} ms, RSS growth ${((rssWorstKb - rssBaseKb) / 1024).toFixed(1)} MB over ${n} cards`);
    expect(healthProbes).toBeGreaterThan(0);
    expect(healthFailures).toEqual([]);
    expect(healthWorstMs).toBeLessThan(1_000);
    expect(rssWorstKb - rssBaseKb).toBeLessThan(100 * 1024);
    // Every card as the API returns it, every event on the stream, every callback and log line.
    const cards = await Promise.all(posted.map((id) => api.card(id)));
    const redisClient = new Redis(redis.url);
    const events = await new EventLog(redisClient).recent(10_000).finally(() => redisClient.disconnect());
    expect(cards.length).toBeGreaterThan(5);
    expect(callbacks.length).toBeGreaterThan(5);
    const everything = { cards: JSON.stringify(cards), events: JSON.stringify(events), callbacks: callbacks.join('\n'), logs: output.join('') };
    for (const secret of [TOKEN, CALLBACK_SECRET, LANE_CALLBACK_SECRET, BOARD_TOKEN]) {
      for (const [where, text] of Object.entries(everything)) expect(text.includes(secret), `${secret.slice(0, 8)}… in ${where}`).toBe(false);
    }
    // REDIS_URL is no secret in logs (it names the server, with any password redacted) but never reaches an agent or a card.
    expect(everything.cards.includes(redis.url)).toBe(false);
  });
});

function readCmdline(pid: string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return undefined;
  }
}

function rssKb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? 0);
}

afterAll(() => rmSync(scratch, { recursive: true, force: true }));
