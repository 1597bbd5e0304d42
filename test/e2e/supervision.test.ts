import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import type { CardRecord, LaneConfigInput, SandboxRecord } from '@lanes/contracts';
import { EventLog } from '@lanes/queue';
import type { SandboxProvider } from '@lanes/sandbox';
import { FaultyProvider, createFaultyProvider } from '@lanes/sandbox/testing';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const agent = [process.execPath, DEMO_AGENT];
const fastRespawn = { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 };

/**
 * The lane's first sandbox gets a lifetime of `lifetimeMs` (the local init ends it then, killing
 * what runs in it); later ones get the worker's own. Nothing else about the provider changes.
 */
function firstSandboxLives(lifetimeMs: number) {
  return (inner: SandboxProvider): SandboxProvider => {
    let first = true;
    return {
      name: inner.name,
      create: (spec, options) => {
        const lifetime = first ? { timeoutMs: lifetimeMs } : {};
        first = false;
        return inner.create({ ...spec, ...lifetime }, options);
      },
      list: (tags) => inner.list(tags),
      terminateById: (id) => inner.terminateById(id),
      close: () => inner.close(),
    };
  };
}

/** Nothing in a card's history or its lane may call a sandbox death an outage. */
function expectNoOutage(card: CardRecord) {
  expect(card.history.some((h) => h.blockedReason === 'provider-outage' || h.verdict === 'provider-outage')).toBe(false);
}

describe('supervision end to end: dead, not down', () => {
  let redis: TestRedis;
  let t: TestStack | undefined;
  let faulty: FaultyProvider | undefined;

  const start = async (lane: LaneConfigInput, withFaults = false, filesBaseDir?: string) => {
    t = await startTestStack(redis.url, [lane], {
      ...(filesBaseDir ? { filesBaseDir } : {}),
      ...(withFaults ? { wrap: (p) => (faulty = p instanceof FaultyProvider ? p : createFaultyProvider(p)) } : {}),
    });
    return t;
  };

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    await t?.stop();
    t = undefined;
    faulty = undefined;
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('kill -9 of the running sandbox: dead, respawned with a new id, the card re-driven to done without spending an attempt', async () => {
    const { api } = await start({ name: 'kill9', slots: 1, agent, respawn: fastRespawn });
    await api.request('POST', '/v1/cards', { id: 'k-1', lane: 'kill9', title: 'survives a kill', metadata: { sleepMs: 1_500 } });
    const running = await api.waitCard('k-1', 'running', (c) => c.state === 'running');
    const slot = (await api.lanes())[0]!.slots.find((s) => s.cardId === 'k-1')!;
    expect(slot.sandbox?.id).toBe(running.sandboxId);
    process.kill(slot.sandbox!.pid!, 'SIGKILL');

    const done = await api.waitCard('k-1', 'done', (c) => c.state === 'done');
    const blocked = done.history.find((h) => h.state === 'blocked')!;
    expect(blocked.blockedReason).toBe('sandbox-dead');
    expect(blocked.verdict).toBe('sandbox-dead');
    expect(blocked.observedExitCode).toBe(137);
    expect(blocked.sandboxId).toBe(running.sandboxId);
    expect(done.sandboxId).not.toBe(running.sandboxId);
    expect(done.attempts).toBe(1);
    expect(done.infraRetries).toBe(1);
    expect(done.observedExitCode).toBe(137);
    expect(done.history.map((h) => h.state)).toEqual(['queued', 'running', 'blocked', 'queued', 'running', 'done']);
    expectNoOutage(done);

    const dead = await waitFor('the dead sandbox record to name its replacement', async () => {
      const r = (await api.request<SandboxRecord>('GET', `/v1/sandboxes/${running.sandboxId}`)).body;
      return r.replacedBy ? r : undefined;
    });
    expect(dead).toMatchObject({ state: 'dead', observedExitCode: 137, replacedBy: done.sandboxId, lane: 'kill9', pid: slot.sandbox!.pid });

    const conn = new Redis(redis.url);
    try {
      const events = (await new EventLog(conn).recent(200)).filter((e) => e.lane === 'kill9');
      const types = events.map((e) => e.type);
      for (const type of ['sandbox.dead', 'card.blocked', 'sandbox.respawned', 'card.redriven'] as const) expect(types).toContain(type);
      expect(types.indexOf('card.blocked')).toBeLessThan(types.indexOf('card.redriven'));
      expect(events.find((e) => e.type === 'sandbox.dead')).toMatchObject({ sandboxId: running.sandboxId, data: { observedExitCode: 137 } });
      expect(types.some((t) => t.startsWith('breaker.'))).toBe(false);
    } finally {
      conn.disconnect();
    }

    const lane = (await api.lanes())[0]!;
    expect(lane.outage).toBe(false);
    expect(lane.breaker.state).toBe('closed');
    expect(lane.slots[0]!.sandbox).toMatchObject({ id: done.sandboxId, state: 'live' });
  });

  it('a sandbox that ends under an agent which printed: the exit 137 with output is confirmed by a poll, blocked sandbox-dead (124) without spending an attempt, then done on a new sandbox', async () => {
    const marks = mkdtempSync(join(tmpdir(), 'lanes-death-exit-'));
    try {
      // First run: leave a mark, print, and work until the sandbox ends. Any later run: done at once.
      const script = 'if [ -e "$1" ]; then echo again; exit 0; fi; : > "$1"; echo working; sleep 60';
      const lane: LaneConfigInput = { name: 'deathexit', slots: 1, agent: ['sh', '-c', script, 'agent', join(marks, 'ran')], respawn: fastRespawn };
      t = await startTestStack(redis.url, [lane], { wrap: firstSandboxLives(4_000) });
      const { api } = t;
      const first = await waitFor('a live sandbox', async () => {
        const sb = (await api.lanes())[0]!.slots[0]?.sandbox;
        return sb?.state === 'live' ? sb : undefined;
      });
      await api.request('POST', '/v1/cards', { id: 'de-1', lane: 'deathexit', title: 'outlived by its sandbox' });

      const done = await api.waitCard('de-1', 'done', (c) => c.state === 'done', 30_000);
      const blocked = done.history.find((h) => h.state === 'blocked')!;
      expect(blocked).toMatchObject({ blockedReason: 'sandbox-dead', verdict: 'sandbox-dead', observedExitCode: 124, sandboxId: first.id });
      // The death came back as the agent's exit status with its output, and one poll confirmed it.
      expect(blocked.message).toMatch(/exit 137 with output could be the sandbox's death.*poll: sandbox exited\(124\)/);
      expect(done.history.map((h) => h.state)).toEqual(['queued', 'running', 'blocked', 'queued', 'running', 'done']);
      expect(done.attempts).toBe(1);
      expect(done.infraRetries).toBe(1);
      expect(done.sandboxId).not.toBe(first.id);
      expectNoOutage(done);

      const dead = (await api.request<SandboxRecord>('GET', `/v1/sandboxes/${first.id}`)).body;
      expect(dead).toMatchObject({ state: 'dead', observedExitCode: 124, replacedBy: done.sandboxId });
      const lanes = (await api.lanes())[0]!;
      expect(lanes.breaker.state).toBe('closed');
      expect(lanes.slots[0]!.sandbox).toMatchObject({ id: done.sandboxId, state: 'live' });
    } finally {
      rmSync(marks, { recursive: true, force: true });
    }
  });

  it('an agent that prints and kills itself (137) on a live sandbox: command-failed, its attempt spent, the same sandbox serves on', async () => {
    const lane: LaneConfigInput = { name: 'selfkill', slots: 1, agent: ['sh', '-c', 'echo hi; kill -9 $$'], attempts: 1, respawn: fastRespawn };
    t = await startTestStack(redis.url, [lane]);
    const { api } = t;
    await api.request('POST', '/v1/cards', { id: 'sk-1', lane: 'selfkill', title: 'kills itself' });
    const failed = await api.waitCard('sk-1', 'failed', (c) => c.state === 'failed');
    expect(failed).toMatchObject({ failedReason: 'command-failed', attempts: 1, infraRetries: 0 });
    expect(failed.history.at(-1)!.message).toMatch(/agent exited 137: hi$/);
    expect(failed.history.some((h) => h.state === 'blocked')).toBe(false);
    const slot = (await api.lanes())[0]!.slots[0]!;
    expect(slot.sandbox).toMatchObject({ id: failed.sandboxId, state: 'live' });
    const conn = new Redis(redis.url);
    try {
      const types = (await new EventLog(conn).recent(200)).filter((e) => e.lane === 'selfkill').map((e) => e.type);
      expect(types).not.toContain('sandbox.dead');
    } finally {
      conn.disconnect();
    }
  });

  it('a sandbox that dies while its slot is idle is respawned before any card meets it', async () => {
    const { api } = await start({ name: 'idle', slots: 1, agent, respawn: fastRespawn });
    const before = await waitFor('a live sandbox', async () => {
      const sb = (await api.lanes())[0]!.slots[0]?.sandbox;
      return sb?.state === 'live' ? sb : undefined;
    });
    process.kill(before.pid!, 'SIGKILL');
    const after = await waitFor('a replacement, found by the heartbeat poll', async () => {
      const sb = (await api.lanes())[0]!.slots[0]?.sandbox;
      return sb?.state === 'live' && sb.id !== before.id ? sb : undefined;
    });
    const record = (await api.request<SandboxRecord>('GET', `/v1/sandboxes/${before.id}`)).body;
    expect(record).toMatchObject({ state: 'dead', observedExitCode: 137, replacedBy: after.id });
    await api.request('POST', '/v1/cards', { id: 'idle-1', lane: 'idle', title: 'after an idle death' });
    const done = await api.waitCard('idle-1', 'done', (c) => c.state === 'done');
    expect(done.infraRetries).toBe(0);
    expect(done.sandboxId).toBe(after.id);
  });

  it('file sync is applied to every new sandbox, the respawned one included', async () => {
    const base = mkdtempSync(join(tmpdir(), 'lanes-files-'));
    try {
      mkdirSync(join(base, 'skills', 'deep'), { recursive: true });
      writeFileSync(join(base, 'skills', 'hello.txt'), 'hello from the host');
      writeFileSync(join(base, 'skills', 'deep', 'n.txt'), '42');
      // A constant script: the only inputs are the env the runner sets.
      const reader = [
        "const p = require('path'), fs = require('fs');",
        "const w = p.resolve(process.env.LANES_CARD_FILE, '../../..');",
        "const skill = fs.readFileSync(p.join(w, 'skills/hello.txt'), 'utf8') + '/' + fs.readFileSync(p.join(w, 'skills/deep/n.txt'), 'utf8');",
        "fs.writeFileSync(p.join(process.env.LANES_OUTPUT_DIR, 'result.json'), JSON.stringify({ skill, workdir: w }));",
      ].join('\n');
      const { api } = await start(
        { name: 'files', slots: 1, agent: [process.execPath, '-e', reader], files: [{ from: 'skills', to: 'skills' }], respawn: fastRespawn },
        false,
        base,
      );
      await api.request('POST', '/v1/cards', { id: 'f-1', lane: 'files', title: 'read the skill' });
      const first = await api.waitCard('f-1', 'done', (c) => c.state === 'done');
      expect(first.result).toMatchObject({ skill: 'hello from the host/42' });

      const pid = (await api.lanes())[0]!.slots[0]!.sandbox!.pid!;
      process.kill(pid, 'SIGKILL');
      await waitFor('a replacement sandbox', async () => {
        const sb = (await api.lanes())[0]!.slots[0]?.sandbox;
        return sb?.state === 'live' && sb.id !== first.sandboxId;
      });
      await api.request('POST', '/v1/cards', { id: 'f-2', lane: 'files', title: 'read it again' });
      const second = await api.waitCard('f-2', 'done', (c) => c.state === 'done');
      expect(second.sandboxId).not.toBe(first.sandboxId);
      expect(second.result).toMatchObject({ skill: 'hello from the host/42' });
      expect((second.result as { workdir: string }).workdir).not.toBe((first.result as { workdir: string }).workdir);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('bare exit 1 while poll() says live and the canary answers: command-failed, no respawn', async () => {
    const { api } = await start({ name: 'barelive', slots: 1, agent, attempts: 1, respawn: fastRespawn }, true);
    const before = await waitFor('a live sandbox', async () => (await api.lanes())[0]!.slots[0]?.sandbox?.state === 'live' && (await api.lanes())[0]!.slots[0]!.sandbox!.id);
    faulty!.setPlan({ bareExit1Every: 1, bareExit1Mode: 'live', targetCards: ['bl-1'] });
    await api.request('POST', '/v1/cards', { id: 'bl-1', lane: 'barelive', title: 'bare exit' });
    const failed = await api.waitCard('bl-1', 'failed', (c) => c.state === 'failed');
    expect(failed.failedReason).toBe('command-failed');
    expect(failed.history.some((h) => h.state === 'blocked')).toBe(false);
    expect(faulty!.stats.bareExit1Injected).toBeGreaterThan(0);
    expect(faulty!.stats.sandboxesKilled).toBe(0);
    const slot = (await api.lanes())[0]!.slots[0]!;
    expect(slot.sandbox).toMatchObject({ id: before, state: 'live' });
    // The same sandbox keeps serving.
    await api.request('POST', '/v1/cards', { id: 'bl-2', lane: 'barelive', title: 'fine' });
    expect((await api.waitCard('bl-2', 'done', (c) => c.state === 'done')).sandboxId).toBe(before);
  });

  it('bare exit 1 with poll() exited(0): dead, and observedExitCode 0 is recorded as 0', async () => {
    const { api } = await start({ name: 'exit0', slots: 1, agent, respawn: fastRespawn }, true);
    faulty!.setPlan({ bareExit1Every: 1, bareExit1Mode: 'exited-0', targetCards: ['z-1'] });
    await api.request('POST', '/v1/cards', { id: 'z-1', lane: 'exit0', title: 'exit zero' });
    const blocked = await api.waitCard('z-1', 'blocked', (c) => c.history.some((h) => h.state === 'blocked'));
    faulty!.setPlan({});
    const entry = blocked.history.find((h) => h.state === 'blocked')!;
    expect(entry.blockedReason).toBe('sandbox-dead');
    expect(entry.observedExitCode).toBe(0);
    const done = await api.waitCard('z-1', 'done', (c) => c.state === 'done');
    expect(done.observedExitCode).toBe(0);
    const record = (await api.request<SandboxRecord>('GET', `/v1/sandboxes/${entry.sandboxId}`)).body;
    expect(record.state).toBe('dead');
    expect(record.observedExitCode).toBe(0);
    expect(done.attempts).toBe(1);
    expectNoOutage(done);
  });

  it.each([
    ['create failures', { createFailures: 5 }, 'createFailuresInjected'],
    ['connect timeouts', { connectTimeouts: 5 }, 'connectTimeoutsInjected'],
  ] as const)('five %s open the breaker; cards wait as provider-outage, then all reach done', async (_what, faults, stat) => {
    const { api } = await start(
      {
        name: 'breaker',
        slots: 1,
        agent,
        respawn: fastRespawn,
        connectTimeoutMs: 300,
        breaker: { failureThreshold: 5, windowMs: 60_000, openMs: 1_000 },
        faults,
      },
      true,
    );
    await waitFor('breaker open', async () => (await api.lanes())[0]!.breaker.state === 'open', { timeoutMs: 20_000 });
    // Creates failing is the provider's problem: this, and only this, is the lane-level outage call.
    await waitFor('the supervisor to call an outage', async () => (await api.lanes())[0]!.outage);
    // One Redis serves every case here: card ids are per case, so no case sees another's cards.
    const ids = [1, 2, 3].map((i) => `${stat}-${i}`);
    const posted = await api.request<{ cards: Array<{ created: boolean }> }>('POST', '/v1/cards', { cards: ids.map((id) => ({ id, lane: 'breaker', title: id })) });
    expect(posted.body.cards.every((c) => c.created)).toBe(true);
    for (const id of ids) {
      const card = await api.waitCard(id, 'done', (c) => c.state === 'done', 30_000);
      expect(card.attempts).toBe(1);
      expect(card.history.some((h) => h.state === 'failed')).toBe(false);
    }
    const cards = await Promise.all(ids.map((id) => api.card(id)));
    expect(cards.some((c) => c.history.some((h) => h.blockedReason === 'provider-outage'))).toBe(true);
    expect(faulty!.stats[stat]).toBe(5);
    expect((await api.lanes())[0]!.breaker.state).toBe('closed');
    await waitFor('the outage call to clear', async () => !(await api.lanes())[0]!.outage);
  });

  it('the breaker is shared: create failures on two workers add up to one open breaker', async () => {
    const lane: LaneConfigInput = {
      name: 'shared',
      slots: 1,
      agent,
      respawn: fastRespawn,
      breaker: { failureThreshold: 5, windowMs: 60_000, openMs: 1_000 },
      // Three per worker: either worker alone stays under the threshold of five.
      faults: { createFailures: 3 },
    };
    const { api } = await start(lane);
    const second = await startTestStack(redis.url, [lane], { parts: { worker: true, api: false, supervisor: false } });
    try {
      await waitFor('the shared breaker to open', async () => (await api.lanes())[0]!.breaker.state === 'open', { timeoutMs: 20_000 });
      await api.request('POST', '/v1/cards', { id: 'shared-1', lane: 'shared', title: 'after the outage' });
      await api.waitCard('shared-1', 'done', (c) => c.state === 'done', 30_000);
      const conn = new Redis(redis.url);
      try {
        const opened = (await new EventLog(conn).recent(500)).filter((e) => e.lane === 'shared' && e.type === 'breaker.opened');
        // A half-open probe that meets the sixth failure opens it again, so count the first opening.
        expect(opened.length).toBeGreaterThanOrEqual(1);
        expect(opened[0]!.data?.reason).toContain('5 failures');
      } finally {
        conn.disconnect();
      }
      await waitFor('the breaker to close', async () => (await api.lanes())[0]!.breaker.state === 'closed');
    } finally {
      await second.stop();
    }
  });

  it('a lane whose files[].from is missing is misconfigured: the card waits needs-human naming the key, the breaker never hears of it', async () => {
    const base = mkdtempSync(join(tmpdir(), 'lanes-misconfigured-'));
    try {
      const { api } = await start({ name: 'misconf', slots: 1, agent, files: [{ from: './no-such-dir', to: 'skills' }], respawn: fastRespawn }, false, base);
      await api.request('POST', '/v1/cards', { id: 'mc-1', lane: 'misconf', title: 'needs a fixed lane' });
      const blocked = await api.waitCard('mc-1', 'blocked', (c) => c.state === 'blocked', 20_000);
      expect(blocked.blockedReason).toBe('needs-human');
      expect(blocked.blockedMessage).toContain('files.0.from');
      expect(blocked.attempts).toBe(1);
      expectNoOutage(blocked);
      const lane = (await api.lanes())[0]!;
      expect(lane.breaker).toMatchObject({ state: 'closed', failures: 0 });
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('a sandbox that dies on every run of a card fails it with reason infra after its budget; the slot keeps serving', async () => {
    const { api } = await start({ name: 'doom', slots: 1, agent, infraRetries: 2, respawn: fastRespawn }, true);
    faulty!.setPlan({ dieAfterCommands: 1, targetCards: ['doomed'] });
    await api.request('POST', '/v1/cards', { id: 'doomed', lane: 'doom', title: 'cursed' });
    const failed = await api.waitCard('doomed', 'failed', (c) => c.state === 'failed', 30_000);
    expect(failed.failedReason).toBe('infra');
    expect(failed.infraRetries).toBe(2);
    expect(failed.history.filter((h) => h.blockedReason === 'sandbox-dead')).toHaveLength(2);
    expect(failed.history.filter((h) => h.state === 'running')).toHaveLength(3);
    expect(failed.attempts).toBe(1);
    await api.request('POST', '/v1/cards', { id: 'after-doom', lane: 'doom', title: 'fine' });
    await api.waitCard('after-doom', 'done', (c) => c.state === 'done');
  });
});
