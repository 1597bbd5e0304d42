import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { Status } from 'nice-grpc';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { EventLog } from '@lanes/queue';
import { ModalProvider } from '@lanes/sandbox/modal';
import { SDK_FS_TOOLS_PATH, startModalServer, type LocalModalServer, type ModalServerOptions } from '@lanes/sandbox/testing/modal-server';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * The worker and the supervision loop on Modal: the lane's slots use the Modal provider on the real
 * SDK (modal@0.11.1) over the local Modal server (real processes; no per-process kill; terminate → 137).
 */
const SUSPECT_AGENT = 'sleep 1; kill -KILL $$';
/** A slot's own canary: `echo <nonce>` through the command wrapper (the worker's nonces are `lanes-canary-<uuid>`). */
const isSlotCanary = (argv: readonly string[]) => argv.some((a) => a.startsWith('lanes-canary-'));
/** The connect canary ModalProvider.create runs: `sh -c CANARY lanes-canary <workdir> <nonce>`. */
const isConnectCanary = (argv: readonly string[]) => argv.includes('lanes-canary');

/** The server's Modal-like default, and the other form of each router behaviour (docs/modal.md). */
const MODES: ReadonlyArray<[string, ModalServerOptions]> = [
  ['default: finished task NOT_FOUND, running command ends 137', {}],
  ['finished task UNAVAILABLE, running command ends as an error', { router: { finishedTaskCode: Status.UNAVAILABLE, execsAtTaskEnd: 'error' } }],
];

describe.each(MODES)('a lane on the Modal provider (real SDK, local server; %s)', (_mode, serverOptions) => {
  let redis: TestRedis;
  let server: LocalModalServer;
  let t: TestStack;
  /** files[].from for the lane that syncs files into its sandboxes. */
  let filesBase: string;

  /** The stack's log lines (an in-memory sink), to read what the worker said it did. */
  const logLines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) if (line) logLines.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  const laneNamed = async (name: string) => (await t.api.lanes()).find((l) => l.name === name)!;
  /** The execs the server started in a sandbox since `since` whose argv contains `marker`. */
  const execsSince = (sandboxId: string, marker: string, since: number) =>
    (server.sandbox(sandboxId)?.execs ?? []).filter((e) => e.startedAt >= since && e.argv.some((a) => a.includes(marker)));
  /** Resolves once every exec in the sandbox has its wait long-poll out (one TaskExecWait each). */
  const waitsInFlight = (sandboxId: string) =>
    waitFor('every exec wait to be in flight', () => server.faults.calls('TaskExecWait', sandboxId) >= (server.sandbox(sandboxId)?.execs.length ?? 0));

  beforeAll(async () => {
    redis = await startRedis();
    server = await startModalServer(serverOptions);
    filesBase = mkdtempSync(join(tmpdir(), 'lanes-modal-files-'));
    mkdirSync(join(filesBase, 'skills'));
    writeFileSync(join(filesBase, 'skills', 'hello.txt'), 'hello');
    t = await startTestStack(
      redis.url,
      [
        { name: 'modal-lane', slots: 1, agent: [process.execPath, DEMO_AGENT], killGraceMs: 200, respawn: { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 } },
        // An agent that dies by a bare SIGKILL: the suspect exit that makes the supervisor probe.
        { name: 'modal-suspect', slots: 1, agent: ['sh', '-c', SUSPECT_AGENT], attempts: 1, canaryTimeoutMs: 1_000, killGraceMs: 200 },
        // One provider failure opens the breaker, which half-opens after a second.
        {
          name: 'modal-breaker',
          slots: 1,
          agent: [process.execPath, DEMO_AGENT],
          killGraceMs: 200,
          breaker: { failureThreshold: 1, openMs: 1_000 },
          respawn: { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 },
        },
        { name: 'modal-files', slots: 1, agent: [process.execPath, DEMO_AGENT], killGraceMs: 200, files: [{ from: 'skills', to: 'skills' }] },
      ],
      {
        filesBaseDir: filesBase,
        wrap: () => new ModalProvider(server.client(), { appName: 'lanes-e2e', workdir: join(server.rootDir, 'work'), livenessPollIntervalMs: 50, ownsClient: true }),
        log: pino({ level: 'info' }, sink),
      },
    );
  });
  afterAll(async () => {
    await t?.stop();
    await server?.close();
    await redis?.stop();
    if (filesBase) rmSync(filesBase, { recursive: true, force: true });
  });

  it('runs a card to done in a Modal sandbox', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'm-1', lane: 'modal-lane', title: 'on modal', pr: { number: 3, branch: 'feat/m' } });
    const done = await t.api.waitCard('m-1', 'done', (c) => c.state === 'done');
    expect(done.result).toMatchObject({ branch: 'feat/m' });
    expect(server.runningSandboxIds()).toContain(done.sandboxId);
    const slot = (await t.api.lanes())[0]!.slots[0]!;
    expect(slot.sandbox).toMatchObject({ id: done.sandboxId, state: 'live', provider: 'modal' });
  });

  it("a new Modal sandbox passes one canary before its first card, its create's; after a file sync the slot runs its own", async () => {
    /** What ran in a sandbox before the first card's agent, in the order it started. */
    const beforeAgent = (sandboxId: string) => {
      const execs = server.sandbox(sandboxId)!.execs;
      const agentAt = execs.findIndex((e) => e.argv.includes(DEMO_AGENT));
      expect(agentAt).toBeGreaterThan(0);
      return execs.slice(0, agentAt).map((e) => e.argv);
    };
    await t.api.request('POST', '/v1/cards', { id: 'c-1', lane: 'modal-lane', title: 'one canary' });
    const plain = await t.api.waitCard('c-1', 'done', (c) => c.state === 'done');
    expect(beforeAgent(plain.sandboxId!).filter(isConnectCanary)).toHaveLength(1);
    expect(beforeAgent(plain.sandboxId!).filter(isSlotCanary)).toHaveLength(0);

    await t.api.request('POST', '/v1/cards', { id: 'c-2', lane: 'modal-files', title: 'synced first' });
    const synced = await t.api.waitCard('c-2', 'done', (c) => c.state === 'done');
    const ran = beforeAgent(synced.sandboxId!);
    expect(ran.filter(isConnectCanary)).toHaveLength(1);
    // The slot's canary comes after the sync's unpack: it proves the sandbox the cards will get.
    expect(ran.filter(isSlotCanary)).toHaveLength(1);
    expect(ran.findIndex(isSlotCanary)).toBeGreaterThan(ran.findLastIndex((argv) => argv.includes('lanes-sync')));
    expect(ran.some((argv) => argv.includes('lanes-sync'))).toBe(true);
  });

  it("a card's reset and its card file go out together: the write does not wait for the reset's command", async () => {
    await waitFor('the lane to have a live sandbox', async () => (await laneNamed('modal-lane')).slots[0]?.sandbox?.state === 'live');
    const sandboxId = (await laneNamed('modal-lane')).slots[0]!.sandbox!.id;
    const since = Date.now();
    // The reset's start is refused a few times, which the SDK retries with a backoff: the reset starts late.
    server.faults.fail('TaskExecStart', { code: Status.UNAVAILABLE, times: 6, sandboxId, argvIncludes: 'lanes-reset' });
    await t.api.request('POST', '/v1/cards', { id: 'p-1', lane: 'modal-lane', title: 'reset beside write' });
    const done = await t.api.waitCard('p-1', 'done', (c) => c.state === 'done');
    expect(done).toMatchObject({ sandboxId, attempts: 1, infraRetries: 0 });
    const [reset] = execsSince(sandboxId, 'lanes-reset', since);
    const [write] = execsSince(sandboxId, 'cards/p-1/card.json', since);
    expect(write!.argv[0]).toBe(SDK_FS_TOOLS_PATH);
    expect(write!.startedAt).toBeLessThan(reset!.startedAt);
  });

  it('a card file whose write beside the reset failed is written again after the reset: the card runs, no attempt spent', async () => {
    await waitFor('the lane to have a live sandbox', async () => (await laneNamed('modal-lane')).slots[0]?.sandbox?.state === 'live');
    const sandboxId = (await laneNamed('modal-lane')).slots[0]!.sandbox!.id;
    const since = Date.now();
    // Every write of the card file is refused for 400 ms (a status the SDK does not retry), and the
    // reset starts more than a second late (refused starts the SDK retries with a backoff).
    server.faults.fail('TaskExecStart', { code: Status.ABORTED, forMs: 400, sandboxId, argvIncludes: 'cards/p-2/card.json' });
    server.faults.fail('TaskExecStart', { code: Status.UNAVAILABLE, times: 7, sandboxId, argvIncludes: 'lanes-reset' });
    await t.api.request('POST', '/v1/cards', { id: 'p-2', lane: 'modal-lane', title: 'write again' });
    const done = await t.api.waitCard('p-2', 'done', (c) => c.state === 'done');
    expect(done).toMatchObject({ sandboxId, attempts: 1, infraRetries: 0 });
    const [reset] = execsSince(sandboxId, 'lanes-reset', since);
    const writes = execsSince(sandboxId, 'cards/p-2/card.json', since);
    // The only write that started is the one made after the reset.
    expect(writes).toHaveLength(1);
    expect(writes[0]!.startedAt).toBeGreaterThanOrEqual(reset!.endedAt!);
  });

  it('cancelling a running sleep 600: the card ends cancelled with the command killed, and the same Modal sandbox runs the next card', async () => {
    const since = Date.now();
    await t.api.request('POST', '/v1/cards', { id: 'm-2', lane: 'modal-lane', title: 'long', metadata: { sleepMs: 600_000 } });
    const running = await t.api.waitCard('m-2', 'running', (c) => c.state === 'running');
    await waitFor('the agent to start', () => execsSince(running.sandboxId!, DEMO_AGENT, since).length === 1);
    await t.api.request('POST', '/v1/cards/m-2/cancel');
    // A generous deadline: the kill escalation is grace-bounded (200 ms here), not the agent's 600 s.
    const cancelled = await t.api.waitCard('m-2', 'cancelled', (c) => c.state === 'cancelled', 10_000);
    expect(cancelled).toMatchObject({ sandboxId: running.sandboxId, attempts: 1 });
    // The command was killed through the kill exec, not left to run out its 600 s.
    expect(execsSince(running.sandboxId!, DEMO_AGENT, since)[0]!.endedAt).toBeDefined();
    expect(execsSince(running.sandboxId!, 'lanes-kill', since)).not.toHaveLength(0);
    await t.api.request('POST', '/v1/cards', { id: 'm-3', lane: 'modal-lane', title: 'next' });
    expect((await t.api.waitCard('m-3', 'done', (c) => c.state === 'done')).sandboxId).toBe(running.sandboxId);
  });

  it('slow is not silent: a canary answering past its deadline gets a second one, and the healthy sandbox is kept (command-failed)', async () => {
    await waitFor('the suspect lane to go live', async () => (await laneNamed('modal-suspect')).slots[0]?.sandbox?.state === 'live');
    const before = (await laneNamed('modal-suspect')).slots[0]!.sandbox!;
    const since = Date.now();
    await t.api.request('POST', '/v1/cards', { id: 's-1', lane: 'modal-suspect', title: 'dies bare' });
    await waitFor('the agent to start', () => execsSince(before.id, SUSPECT_AGENT, since).length === 1);
    await waitsInFlight(before.id);
    // The next exec wait is the probe's first canary: it answers 2.5 s late, past its 1 s deadline.
    server.faults.delay('TaskExecWait', 2_500, { times: 1 });
    const failed = await t.api.waitCard('s-1', 'failed', (c) => c.state === 'failed', 20_000);
    expect(failed).toMatchObject({ failedReason: 'command-failed', sandboxId: before.id, attempts: 1 });
    // Two canaries ran (the first late, the second on time) and nobody terminated the sandbox.
    expect(execsSince(before.id, 'lanes-canary', since)).toHaveLength(2);
    expect(server.faults.calls('SandboxTerminateV2', before.id)).toBe(0);
    expect(server.sandbox(before.id)!.running).toBe(true);
    expect((await laneNamed('modal-suspect')).slots[0]!.sandbox).toMatchObject({ id: before.id, state: 'live' });
  });

  it('exec wait lost in transport while the sandbox is fine: the command is killed by exec id before the re-run, which spends no attempt', async () => {
    const since = Date.now();
    await t.api.request('POST', '/v1/cards', { id: 'm-9', lane: 'modal-lane', title: 'transport', metadata: { sleepMs: 3_000 } });
    const running = await t.api.waitCard('m-9', 'running', (c) => c.state === 'running');
    const sandboxId = running.sandboxId!;
    await waitFor('the agent to start', () => execsSince(sandboxId, DEMO_AGENT, since).length === 1);
    await waitsInFlight(sandboxId);
    // Cut the wait's long-poll; its redial gets a status the SDK does not retry: exec throws, the sandbox is fine.
    server.faults.fail('TaskExecWait', { code: Status.ABORTED, times: 1, sandboxId });
    expect(server.dropRouterConnections()).toBeGreaterThan(0);
    const done = await t.api.waitCard('m-9', 'done', (c) => c.state === 'done', 30_000);
    expect(done).toMatchObject({ sandboxId, attempts: 1, infraRetries: 1 });
    const [first, second] = execsSince(sandboxId, DEMO_AGENT, since);
    expect(second).toBeDefined();
    // The first run was confirmed stopped before the second started in the same sandbox.
    expect(first!.endedAt).toBeDefined();
    expect(first!.endedAt!).toBeLessThanOrEqual(second!.startedAt);
  });

  it('a Modal sandbox terminated mid-card is dead (137), replaced, and the card re-driven to done', async () => {
    const since = Date.now();
    await t.api.request('POST', '/v1/cards', { id: 'm-4', lane: 'modal-lane', title: 'interrupted', metadata: { sleepMs: 1_500 } });
    const running = await t.api.waitCard('m-4', 'running', (c) => c.state === 'running');
    // Mid-card means mid-agent: a kill during the card's preparation meets its reset and its card
    // file's write at once, and the write reads its own failure with a poll of its own.
    await waitFor('the agent to start', () => execsSince(running.sandboxId!, DEMO_AGENT, since).length === 1);
    const pollsBefore = server.faults.calls('SandboxWaitV2', running.sandboxId!);
    server.killSandbox(running.sandboxId!);
    const done = await t.api.waitCard('m-4', 'done', (c) => c.state === 'done', 30_000);
    const blocked = done.history.find((h) => h.state === 'blocked')!;
    expect(blocked).toMatchObject({ blockedReason: 'sandbox-dead', observedExitCode: 137, sandboxId: running.sandboxId });
    expect(done.sandboxId).not.toBe(running.sandboxId);
    expect(done.attempts).toBe(1);
    expect(done.infraRetries).toBe(1);
    // The exit code came from a poll: the liveness poll made while the command ran, or, when the
    // command's 137 arrived first, the one poll rule 1 makes before the verdict. Recovery polled no more.
    const polls = server.faults.calls('SandboxWaitV2', running.sandboxId!) - pollsBefore;
    expect(polls).toBeGreaterThanOrEqual(1);
    expect(polls).toBeLessThanOrEqual(2);
  });

  it('a router connection dropped mid-card: the SDK resumes and the card reaches done in the same sandbox', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'm-8', lane: 'modal-lane', title: 'dropped', metadata: { sleepMs: 1_500 } });
    const running = await t.api.waitCard('m-8', 'running', (c) => c.state === 'running');
    await waitFor('a router connection to drop', () => server.dropRouterConnections() > 0);
    const done = await t.api.waitCard('m-8', 'done', (c) => c.state === 'done');
    expect(done).toMatchObject({ sandboxId: running.sandboxId, attempts: 1 });
  });

  /** The lane's breaker transitions from the event log, oldest first. */
  const breakerEvents = async (lane: string) => {
    const conn = new Redis(redis.url);
    try {
      return (await new EventLog(conn).recent(500)).filter((e) => e.lane === lane && e.type.startsWith('breaker.'));
    } finally {
      conn.disconnect();
    }
  };

  /** The breaker lane's live sandbox, once it has one. */
  const liveBreakerSandbox = async (): Promise<string> => {
    await waitFor('the breaker lane to have a live sandbox', async () => (await laneNamed('modal-breaker')).slots[0]?.sandbox?.state === 'live', { timeoutMs: 20_000 });
    return (await laneNamed('modal-breaker')).slots[0]!.sandbox!.id;
  };

  it('an open breaker with every slot live half-opens on schedule and closes through an idle canary: the outage clears, no new sandbox', async () => {
    const sandboxId = await liveBreakerSandbox();
    const createsBefore = server.faults.calls('SandboxCreateV2');
    const since = Date.now();
    // The router refuses the card's first commands (a status the SDK does not retry): its reset and
    // its probe canary both fail in transport, and one failure opens the breaker. The card file's
    // write beside the reset (the SDK's own helper, not a wrapped command) is let through.
    server.faults.fail('TaskExecStart', { code: Status.ABORTED, times: 2, sandboxId, argvIncludes: 'lanes-exec' });
    await t.api.request('POST', '/v1/cards', { id: 'b-1', lane: 'modal-breaker', title: 'outage' });
    // Read from the history: blocked lasts only until the half-open (1 s), which a loaded box can miss.
    const done = await t.api.waitCard('b-1', 'done', (c) => c.state === 'done', 30_000);
    expect(done.history.some((h) => h.state === 'blocked' && h.blockedReason === 'provider-outage')).toBe(true);
    // Only a canary closes the breaker: the idle one on the live sandbox, on the breaker's own schedule.
    await waitFor(
      'the breaker to close and the outage flag to clear',
      async () => {
        const lane = await laneNamed('modal-breaker');
        return lane.breaker.state === 'closed' && !lane.outage;
      },
      { timeoutMs: 20_000 },
    );
    expect(done).toMatchObject({ sandboxId, attempts: 1 });
    // The breaker's own record (appended a moment after each move): it opened, every half-open came
    // no earlier than the retry time the opening before it set, and it ended closed.
    const transitions = await waitFor('the breaker.closed event', async () => {
      const seen = (await breakerEvents('modal-breaker')).filter((e) => Date.parse(e.at) >= since);
      return seen.at(-1)?.type === 'breaker.closed' ? seen : undefined;
    });
    expect(transitions[0]!.type).toBe('breaker.opened');
    transitions.forEach((e, i) => {
      if (e.type === 'breaker.half-open') expect(Date.parse(e.at)).toBeGreaterThanOrEqual(Date.parse(String(transitions[i - 1]!.data?.retryAt)));
    });
    // The canary that closed it was an idle one on the live sandbox: it ran inside the last
    // half-open window. The card's own probe canaries ran before its failure opened the breaker,
    // and no canary runs while it is open.
    const at = (e: { at: string }) => Date.parse(e.at);
    const closedAt = at(transitions.at(-1)!);
    const lastHalfOpenAt = at(transitions.filter((e) => e.type === 'breaker.half-open').at(-1)!);
    const canaries = execsSince(sandboxId, 'lanes-canary', since);
    expect(canaries.filter((e) => e.startedAt >= lastHalfOpenAt && e.endedAt !== undefined && e.endedAt <= closedAt)).not.toHaveLength(0);
    // …and the worker says which: its idle probe's canary on that sandbox passed in that window.
    const idlePassed = logLines.filter(
      (l) => l.event === 'sandbox.idle-canary' && l.sandboxId === sandboxId && l.action === 'passed' && Number(l.time) >= lastHalfOpenAt && Number(l.time) <= closedAt,
    );
    expect(idlePassed).not.toHaveLength(0);
    const firstHalfOpenAt = at(transitions.find((e) => e.type === 'breaker.half-open')!);
    expect(canaries.filter((e) => e.startedAt > at(transitions[0]!) && e.startedAt < firstHalfOpenAt)).toEqual([]);
    expect(server.faults.calls('SandboxCreateV2')).toBe(createsBefore);
  }, 90_000);

  it('a sandbox that polls live but whose router refuses every exec is marked dead after a bounded run of failed canaries, respawned, and the outage clears', async () => {
    const sandboxId = await liveBreakerSandbox();
    server.faults.fail('TaskExecStart', { code: Status.ABORTED, forMs: 120_000, sandboxId });
    await t.api.request('POST', '/v1/cards', { id: 'b-2', lane: 'modal-breaker', title: 'broken router' });
    const done = await t.api.waitCard('b-2', 'done', (c) => c.state === 'done', 60_000);
    expect(done.history.some((h) => h.state === 'blocked' && h.blockedReason === 'provider-outage')).toBe(true);
    expect(done.sandboxId).not.toBe(sandboxId);
    expect(done.attempts).toBe(1);
    // Polls said live throughout; only the failed canaries condemned it, and it was terminated.
    expect(server.sandbox(sandboxId)!.running).toBe(false);
    expect(server.faults.calls('SandboxTerminateV2', sandboxId)).toBeGreaterThan(0);
    await waitFor('the outage flag to clear', async () => !(await laneNamed('modal-breaker')).outage, { timeoutMs: 20_000 });
  }, 90_000);

  it('the control plane answers UNAVAILABLE for 20 s while a slot needs a new sandbox: breaker opens, cards wait, all reach done, the outage clears', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'm-5', lane: 'modal-lane', title: 'dies', metadata: { sleepMs: 3_000 } });
    const running = await t.api.waitCard('m-5', 'running', (c) => c.state === 'running');
    // Creates fail from the kill on, so the respawn (20 ms backoff) cannot slip in before the outage;
    // the whole control plane goes down once the death has been seen (a dead poll needs it up).
    server.faults.fail('SandboxCreateV2', { forMs: 20_000 });
    server.killSandbox(running.sandboxId!);
    // Read from the history: the sweep may re-drive the card before a poll catches it blocked.
    await t.api.waitCard('m-5', 'blocked (sandbox-dead)', (c) => c.history.some((h) => h.state === 'blocked' && h.blockedReason === 'sandbox-dead'));
    server.faults.fail('ModalClient', { forMs: 20_000 });
    for (const id of ['m-6', 'm-7']) await t.api.request('POST', '/v1/cards', { id, lane: 'modal-lane', title: id });
    await waitFor(
      'the breaker to open and the lane to read outage',
      async () => {
        const lane = (await t.api.lanes())[0]!;
        return lane.breaker.state === 'open' && lane.outage;
      },
      { timeoutMs: 20_000 },
    );
    await t.api.waitCard('m-6', 'blocked (provider-outage)', (c) => c.state === 'blocked' && c.blockedReason === 'provider-outage', 20_000);
    for (const id of ['m-5', 'm-6', 'm-7']) await t.api.waitCard(id, 'done', (c) => c.state === 'done', 90_000);
    await waitFor('the outage flag to clear', async () => !(await t.api.lanes())[0]!.outage);
  }, 150_000);
});
