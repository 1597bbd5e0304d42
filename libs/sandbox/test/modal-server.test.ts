import { existsSync } from 'node:fs';
import { ConflictError, InvalidError, SandboxFilesystemIsADirectoryError, SandboxFilesystemNotFoundError, type ModalClient, type Sandbox } from 'modal';
import { ClientError, Status } from 'nice-grpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startModalServer, PINNED_MODAL_SDK_VERSION, type LocalModalServer } from '@lanes/sandbox/testing/modal-server';
import { findByEnvEntry } from '../src/proc.js';
import { SANDBOX_ID_ENV } from '../src/sandbox-reaper.js';
import { waitFor } from './support/wait-for.js';

// The local Modal server, driven by the real SDK (modal@0.11.1) directly: what the server does is
// what the SDK sees, so every provider test on top of it runs against the SDK's real behaviour.

let server: LocalModalServer;
let client: ModalClient;

beforeEach(async () => {
  server = await startModalServer();
  client = server.client();
});

afterEach(async () => {
  client.close();
  await server.close();
});

async function sandbox(params: { timeoutMs?: number; env?: Record<string, string>; tags?: Record<string, string> } = {}): Promise<Sandbox> {
  const app = await client.apps.fromName('server-test', { createIfMissing: true });
  const image = await client.images.fromRegistry('debian:bookworm-slim').build(app);
  return client.sandboxes.create(app, image, { timeoutMs: 60_000, ...params });
}

function settledState(p: Promise<unknown>): { settled: boolean } {
  const state = { settled: false };
  p.then(
    () => (state.settled = true),
    () => (state.settled = true),
  );
  return state;
}

describe('local Modal server: exec on real processes', () => {
  it('serves the pinned SDK version', () => {
    expect(client.version()).toBe(PINNED_MODAL_SDK_VERSION);
  });

  it('runs argv with env and workdir, streams stdout/stderr, reports exit codes and signals as 128+n', async () => {
    const sb = await sandbox({ env: { FROM_SANDBOX: 'sb' } });
    const p = await sb.exec(['sh', '-c', 'echo "$FROM_SANDBOX $FROM_EXEC $(pwd)"; echo err >&2; exit 3'], { env: { FROM_EXEC: 'ex' }, workdir: server.rootDir });
    expect([await p.stdout.readText(), await p.stderr.readText(), await p.wait()]).toEqual([`sb ex ${server.rootDir}\n`, 'err\n', 3]);
    expect(await (await sb.exec(['sh', '-c', 'kill -TERM $$'])).wait()).toBe(143);
  });

  it('the SDK rejects a timeout that is not whole seconds with a plain Error, before anything reaches the server', async () => {
    const sb = await sandbox();
    const before = server.faults.calls('TaskExecStart');
    const error = await sb.exec(['true'], { timeoutMs: 1_500 }).catch((e: unknown) => e);
    expect((error as Error).constructor).toBe(Error);
    expect(error).not.toBeInstanceOf(InvalidError);
    expect(server.faults.calls('TaskExecStart')).toBe(before);
  });

  it("enforces the exec's server-side timeout by killing the exec (SIGKILL → 137)", async () => {
    const sb = await sandbox();
    const p = await sb.exec(['sleep', '30'], { timeoutMs: 1_000 });
    expect(await p.wait()).toBe(137);
    expect(await sb.poll()).toBeNull();
  });

  it('files through the SDK filesystem API (an exec of its fs helper): roundtrip, missing, directory', async () => {
    const sb = await sandbox();
    const path = `${server.rootDir}/files/a.txt`;
    await sb.filesystem.writeText('hello', path);
    expect(await sb.filesystem.readText(path)).toBe('hello');
    await expect(sb.filesystem.readBytes(`${server.rootDir}/nope`)).rejects.toBeInstanceOf(SandboxFilesystemNotFoundError);
    await expect(sb.filesystem.readBytes(`${server.rootDir}/files`)).rejects.toBeInstanceOf(SandboxFilesystemIsADirectoryError);
  });
});

describe('local Modal server: sandbox lifecycle', () => {
  it("terminate: polls 137, is idempotent; a fresh handle's exec is a ConflictError; an unknown id is NOT_FOUND", async () => {
    const sb = await sandbox();
    await sb.terminate();
    await sb.terminate();
    expect(await sb.poll()).toBe(137);
    await expect((await client.sandboxes.fromId(sb.sandboxId)).exec(['true'])).rejects.toBeInstanceOf(ConflictError);
    const unknown = await client.sandboxes.fromId('sb-never-existed');
    await expect(unknown.poll()).rejects.toMatchObject({ code: Status.NOT_FOUND });
  });

  it('a sandbox that reaches its lifetime polls 124 and its processes are gone', async () => {
    const sb = await sandbox({ timeoutMs: 1_000 });
    await waitFor('the lifetime to end the sandbox', async () => (await sb.poll()) !== null);
    expect(await sb.poll()).toBe(124);
    await waitFor('its processes to be gone', () => findByEnvEntry(`${SANDBOX_ID_ENV}=${sb.sandboxId}`, new Set([process.pid])).length === 0);
  });

  it("router answering UNAVAILABLE for a finished task, execs ending as errors: the SDK's wait on a killed sandbox keeps retrying and does not settle", async () => {
    server.router.finishedTaskCode = Status.UNAVAILABLE;
    server.router.execsAtTaskEnd = 'error';
    const sb = await sandbox();
    const p = await sb.exec(['sleep', '30']);
    const waiting = p.wait();
    const state = settledState(waiting);
    const before = server.faults.calls('TaskExecWait');
    server.killSandbox(sb.sandboxId);
    await waitFor('two more wait retries', () => server.faults.calls('TaskExecWait') >= before + 2, { timeoutMs: 10_000 });
    expect(state.settled).toBe(false);
    expect(await sb.poll()).toBe(137);
    // A router that answers NOT_FOUND for a finished task instead ends the wait: the behaviour is a knob.
    server.router.finishedTaskCode = Status.NOT_FOUND;
    await expect(waiting).rejects.toBeInstanceOf(ClientError);
  });

  it.each([
    ['killed from outside', (id: string) => server.killSandbox(id), 137],
    ['terminated by someone else', (id: string) => server.terminateSandbox(id), 137],
  ])("default (Modal's): a command running when its sandbox is %s ends 137 with its output; later router calls are NOT_FOUND", async (_how, end, polled) => {
    const sb = await sandbox();
    const p = await sb.exec(['sh', '-c', 'echo before; exec sleep 30']);
    // The calls already waiting when the task ends are the ones that see the command's end.
    const waiting = p.wait();
    const stdout = p.stdout.getReader();
    expect((await stdout.read()).value).toBe('before\n');
    await waitFor('the wait to be in flight', () => server.faults.calls('TaskExecWait') >= 1);
    end(sb.sandboxId);
    expect(await waiting).toBe(137);
    expect((await stdout.read()).done).toBe(true);
    expect(await sb.poll()).toBe(polled);
    await expect(sb.exec(['true'])).rejects.toMatchObject({ code: Status.NOT_FOUND });
  });

  it("default: a command running when the sandbox's lifetime runs out ends 137, and the sandbox polls 124", async () => {
    const sb = await sandbox({ timeoutMs: 2_000 });
    const p = await sb.exec(['sleep', '30']);
    const waiting = p.wait();
    await waitFor('the wait to be in flight', () => server.faults.calls('TaskExecWait') >= 1);
    expect(await waiting).toBe(137);
    expect(await sb.poll()).toBe(124);
  });

  it('execsAtTaskEnd error: the waiting wait gets the finished-task code instead of a status', async () => {
    server.router.execsAtTaskEnd = 'error';
    const sb = await sandbox();
    const p = await sb.exec(['sleep', '30']);
    await waitFor('the command to run', () => server.sandbox(sb.sandboxId)?.execs.length === 1);
    const waiting = p.wait();
    await waitFor('the wait to be in flight', () => server.faults.calls('TaskExecWait') >= 1);
    server.killSandbox(sb.sandboxId);
    await expect(waiting).rejects.toMatchObject({ code: Status.NOT_FOUND });
  });

  it("terminated mid-command by someone else: polls 137 and the command's process is gone", async () => {
    const sb = await sandbox();
    await sb.exec(['sleep', '30']);
    await waitFor('the command to run', () => server.sandbox(sb.sandboxId)?.execs.length === 1);
    server.terminateSandbox(sb.sandboxId);
    expect(await sb.poll()).toBe(137);
    await waitFor('its processes to be gone', () => findByEnvEntry(`${SANDBOX_ID_ENV}=${sb.sandboxId}`, new Set([process.pid])).length === 0);
  });

  it('lists running sandboxes by app and tags, across pages; tags can be read and replaced', async () => {
    const a = await sandbox({ tags: { lane: 'x', slot: '1' } });
    const b = await sandbox({ tags: { lane: 'x', slot: '2' } });
    await sandbox({ tags: { lane: 'y' } });
    const ids: string[] = [];
    for await (const s of client.sandboxes.list({ appId: (await client.apps.fromName('server-test')).appId, tags: { lane: 'x' } })) ids.push(s.sandboxId);
    expect(ids.sort()).toEqual([a.sandboxId, b.sandboxId].sort());
    await b.setTags({ lane: 'z' });
    expect(await b.getTags()).toEqual({ lane: 'z' });
    await a.terminate();
    const left: string[] = [];
    for await (const s of client.sandboxes.list({ tags: { lane: 'x' } })) left.push(s.sandboxId);
    expect(left).toEqual([]);
  });

  it("every sandbox process carries the test run's marker, so the harness leak guard sees it", async () => {
    const previous = process.env['LANES_TEST_RUN_ID'];
    process.env['LANES_TEST_RUN_ID'] = previous ?? 'run-modal-server-test';
    try {
      const sb = await sandbox();
      const p = await sb.exec(['sh', '-c', 'printf %s "$LANES_TEST_RUN_ID"']);
      expect(await p.stdout.readText()).toBe(process.env['LANES_TEST_RUN_ID']);
    } finally {
      if (previous === undefined) delete process.env['LANES_TEST_RUN_ID'];
    }
  });

  it('close() kills every process of every sandbox, escaped ones included, and removes its directory', async () => {
    const sb = await sandbox();
    // The escapees let go of stdout, so the exec's output ends when its shell exits.
    const p = await sb.exec(['sh', '-c', 'setsid sleep 30 >/dev/null 2>&1 & ( setsid sleep 30 >/dev/null 2>&1 & ) ; echo started']);
    expect(await p.stdout.readText()).toBe('started\n');
    const marker = `${SANDBOX_ID_ENV}=${sb.sandboxId}`;
    expect(findByEnvEntry(marker, new Set([process.pid])).length).toBeGreaterThan(0);
    await server.close();
    expect(findByEnvEntry(marker, new Set([process.pid]))).toEqual([]);
    expect(existsSync(server.rootDir)).toBe(false);
  });
});

describe('local Modal server: faults and counts', () => {
  it('a burst by count: the SDK absorbs three UNAVAILABLEs on a control-plane call; a fourth surfaces', async () => {
    const sb = await sandbox();
    server.faults.fail('SandboxWaitV2', { times: 3 });
    expect(await sb.poll()).toBeNull();
    server.faults.fail('SandboxWaitV2', { times: 4 });
    await expect(sb.poll()).rejects.toMatchObject({ code: Status.UNAVAILABLE });
  });

  it('a burst by time window, scoped to one sandbox; DEADLINE_EXCEEDED too; every call is counted', async () => {
    const a = await sandbox();
    const b = await sandbox();
    server.faults.fail('SandboxWaitV2', { code: Status.DEADLINE_EXCEEDED, forMs: 60_000, sandboxId: a.sandboxId });
    const before = server.faults.calls('SandboxWaitV2');
    await expect(a.poll()).rejects.toMatchObject({ code: Status.DEADLINE_EXCEEDED });
    expect(await b.poll()).toBeNull();
    expect(server.faults.calls('SandboxWaitV2') - before).toBe(4 + 1);
    server.faults.clear();
    expect(await a.poll()).toBeNull();
  });

  it('a whole service can fail: the control plane down leaves the router (running commands) alone', async () => {
    const sb = await sandbox();
    const p = await sb.exec(['sh', '-c', 'sleep 0.3; echo ok']);
    server.faults.fail('ModalClient', { forMs: 60_000 });
    expect([await p.stdout.readText(), await p.wait()]).toEqual(['ok\n', 0]);
    await expect(sb.poll()).rejects.toMatchObject({ code: Status.UNAVAILABLE });
  });

  it('a slow answer: a delayed RPC answers late but answers', async () => {
    const sb = await sandbox();
    server.faults.delay('SandboxWaitV2', 300);
    const polled = sb.poll();
    const state = settledState(polled);
    await waitFor('the delayed call to arrive', () => server.faults.calls('SandboxWaitV2') > 0);
    expect(state.settled).toBe(false);
    expect(await polled).toBeNull();
  });

  it('a router connection dropped mid-stream: the SDK redials and resumes the output at its offset', async () => {
    const sb = await sandbox();
    const p = await sb.exec(['sh', '-c', 'echo one; sleep 0.5; echo two']);
    const reader = p.stdout.getReader();
    expect((await reader.read()).value).toBe('one\n');
    expect(server.dropRouterConnections()).toBeGreaterThan(0);
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += r.value;
    expect(rest).toBe('two\n');
    expect(await p.wait()).toBe(0);
  });
});
