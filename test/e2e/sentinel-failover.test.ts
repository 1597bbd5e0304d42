import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { PROJECT_DIR } from '@lanes/cli';
import { isTerminalCardState, type CardRecord } from '@lanes/contracts';
import { detectIsolation } from '@lanes/sandbox';
import { keys } from '@lanes/queue';
import { apiClient, freePort, startSentinelGroup, waitFor, type TestSentinelGroup } from '../harness/index.js';

const BIN = join(PROJECT_DIR, 'apps/cli/bin/lanes.js');
const CARDS = 12;
const SLOTS = 3;
/** Long enough that the kill lands while every slot has a card in its agent. */
const AGENT_MS = 2_000;

/** An agent that writes `start <card>` and `end <card>` to a ledger around its work, so every run is counted outside Redis. */
const AGENT = `
import { appendFileSync, writeFileSync } from 'node:fs';
const [ledger, ms] = process.argv.slice(2);
const id = process.env.LANES_CARD_ID;
appendFileSync(ledger, 'start ' + id + '\\n');
await new Promise((r) => setTimeout(r, Number(ms)));
writeFileSync(process.env.LANES_OUTPUT_DIR + '/result.json', JSON.stringify({ card: id }));
appendFileSync(ledger, 'end ' + id + '\\n');
`;

/**
 * The real `lanes up` (API, worker, supervisor, Bull Board in one process) pointed at a Sentinel
 * group through REDIS_SENTINELS, with passwords on the data nodes and on the sentinels. The
 * primary is kill -9ed while every slot runs a card; after the replica is promoted every card
 * reaches done, and none ends twice.
 */
describe('lanes up on Sentinel, across a kill -9 of the primary', () => {
  let group: TestSentinelGroup;
  let dir: string;
  let ledger: string;
  let child: ChildProcess | undefined;
  const output: string[] = [];

  beforeAll(async () => {
    group = await startSentinelGroup({ password: 'data-pw-1', sentinelPassword: 'sentinel-pw-1' });
    dir = mkdtempSync(join(tmpdir(), 'lanes-sentinel-e2e-'));
    ledger = join(dir, 'ledger');
    writeFileSync(ledger, '');
    const agent = join(dir, 'agent.mjs');
    writeFileSync(agent, AGENT);
    writeFileSync(
      join(dir, 'lanes.json'),
      JSON.stringify({
        lanes: [{ name: 'ha', slots: SLOTS, isolation: detectIsolation(), agent: [process.execPath, agent, ledger, String(AGENT_MS)], attempts: 3, commandTimeoutMs: 30_000 }],
      }),
    );
  });
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once('exit', r));
      child.kill('SIGKILL');
      await gone;
    }
    await group?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const runs = () => {
    const lines = existsSync(ledger) ? readFileSync(ledger, 'utf8').split('\n').filter(Boolean) : [];
    const count = (what: string, id: string) => lines.filter((l) => l === `${what} ${id}`).length;
    return { lines, count };
  };

  it('every card reaches done, none lost and none ended twice', async () => {
    onTestFailed(() => {
      const lines = output
        .join('')
        .split('\n')
        .filter((l) => !/"(incoming request|request completed)"/.test(l));
      console.error(`lanes up said (last 80 lines):\n${lines.slice(-80).join('\n')}\nledger:\n${runs().lines.join('\n')}`);
    });
    const port = await freePort();
    const sentinels = group.sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',');
    const { REDIS_URL: _unset, ...inherited } = process.env;
    child = spawn(process.execPath, [BIN, 'up'], {
      env: {
        ...inherited,
        HOME: dir,
        LANES_CONFIG: join(dir, 'lanes.json'),
        LANES_PORT: String(port),
        LANES_SANDBOX_DIR: join(dir, 'sandboxes'),
        LANES_LOG_FORMAT: 'json',
        REDIS_SENTINELS: sentinels,
        REDIS_SENTINEL_NAME: group.name,
        REDIS_PASSWORD: 'data-pw-1',
        REDIS_SENTINEL_PASSWORD: 'sentinel-pw-1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
    child.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
    const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));
    const url = `http://127.0.0.1:${port}`;
    const api = apiClient(url);
    await waitFor('lanes up to say it is up', () => output.join('').includes('"event":"stack.started"'), {
      abortOn: () => child!.exitCode !== null,
      timeoutMs: 30_000,
    });
    const started = output.join('');
    if (child.exitCode !== null) throw new Error(`lanes up exited: ${started}`);
    expect(started).toContain('"redisSource":"Sentinel"');
    expect(started).toContain(`redis+sentinel://:***@${sentinels.split(',')[0]}`);
    expect(started).not.toMatch(/data-pw-1|sentinel-pw-1/);

    const ids = Array.from({ length: CARDS }, (_, i) => `sf-${i}`);
    const post = await api.request('POST', '/v1/cards', { cards: ids.map((id) => ({ id, lane: 'ha', title: `card ${id}` })) });
    expect(post.status).toBe(202);

    // Every slot has a card in its agent: started, not ended.
    const inFlight = await waitFor(`${SLOTS} cards in flight`, () => {
      const { count } = runs();
      const running = ids.filter((id) => count('start', id) > count('end', id));
      return running.length >= SLOTS ? running : undefined;
    });
    const before = await group.primaryPort();
    // The runs in flight waited for the replica before their agents started (replica-ack.ts): the
    // replica, about to be promoted, has them running, each under its run token.
    const replica = group.nodes.find((n) => n.port !== before)!;
    const onReplica = group.connect(replica.port);
    try {
      expect(await onReplica.exists(keys.replicaAck())).toBe(1);
      for (const id of inFlight) expect(await onReplica.hget(keys.card(id), 'state'), id).toBe('running');
    } finally {
      onReplica.disconnect();
    }
    const killedAt = Date.now();
    const killed = await group.killPrimary();
    expect(killed).toBe(before);
    // No primary: the API says so and holds nothing (it fails fast, as in any Redis outage).
    await waitFor('the API to answer 503 REDIS_UNAVAILABLE while there is no primary', async () => {
      const res = await api.request<{ error: { code: string } }>('GET', `/v1/cards/${inFlight[0]}`);
      return res.status === 503 && res.body.error.code === 'REDIS_UNAVAILABLE';
    });
    const promoted = await group.waitForPromotion(killed);
    expect(promoted).not.toBe(killed);

    const cards: CardRecord[] = [];
    for (const id of ids) cards.push(await api.waitCard(id, 'done', (c) => c.state === 'done', 40_000));
    const { count } = runs();
    for (const card of cards) {
      const terminal = card.history.filter((h) => isTerminalCardState(h.state));
      expect(
        terminal.map((h) => h.state),
        card.id,
      ).toEqual(['done']);
      expect(card.result, card.id).toEqual({ card: card.id });
      // Its agent finished at least once outside Redis too; a done card never came from nowhere.
      expect(count('end', card.id), card.id).toBeGreaterThanOrEqual(1);
    }

    // The cards in their agents at the kill were committed after it: across the failover, not before it.
    for (const id of inFlight) {
      const done = cards.find((c) => c.id === id)!.history.find((h) => h.state === 'done')!;
      expect(Date.parse(done.at), id).toBeGreaterThanOrEqual(killedAt);
    }

    // A failover shorter than the lock (BullMQ's 30 s here) kills no live work: the supervisor
    // reaped nothing, and no run was fenced or refused. (With a lock of a few seconds, the runs in
    // flight fence themselves, as in any Redis outage that long, and run again.)
    const said = output.join('');
    for (const event of ['sandbox.reaped', 'card.stale-write', 'card.fenced']) expect(said, event).not.toContain(`"event":"${event}"`);
    // Every request the API failed while there was no primary was a 503, never a 500.
    expect(said).not.toContain('"statusCode":500');

    // Bull Board reads the queue from the promoted primary.
    const board = await api.request<{ queues: Array<{ name: string; counts: Record<string, number> }> }>('GET', '/admin/queues/api/queues');
    expect(board.status).toBe(200);
    expect(board.body.queues.find((q) => q.name === 'ha')?.counts.completed).toBe(CARDS);

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
