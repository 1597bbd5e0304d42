import { Status } from 'nice-grpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConnectTimeoutError, ProviderInvalidError, ProviderUnavailableError, SandboxGoneError, defaults } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';
import { SDK_CONTROL_ATTEMPTS, modalFixture, modalTestSpec, type ModalFixture } from './support/modal-fixture.js';
import { waitFor } from './support/wait-for.js';

// ModalProvider on the real SDK (modal@0.11.1) over the local Modal server.

let f: ModalFixture;
const handles: SandboxHandle[] = [];

beforeEach(async () => {
  f = await modalFixture();
});

afterEach(async () => {
  for (const h of handles.splice(0)) await h.terminate().catch(() => undefined);
  await f.cleanup();
});

async function create(slot = 's1', options = {}): Promise<SandboxHandle> {
  const handle = await f.provider.create(modalTestSpec(slot), options);
  handles.push(handle);
  return handle;
}

/** The execs the server started in one sandbox, in order (the canary included). */
function execsOf(id: string): string[][] {
  return (f.server.sandbox(id)?.execs ?? []).map((e) => e.argv);
}

describe('ModalProvider.create', () => {
  it('creates in the named app (created if missing), tagged, with env and a lifetime always set', async () => {
    const handle = await create('slot-7');
    const info = f.server.sandbox(handle.id);
    expect(info).toMatchObject({
      running: true,
      tags: { lane: 'contract', slot: 'slot-7', worker: `w-${process.pid}` },
      lifetimeMs: defaults.DEFAULT_SANDBOX_LIFETIME_MS,
    });
    expect(info?.env['LANES_TEST_SPEC_ENV']).toBe('from-spec');
    expect(handle.provider).toBe('modal');
    // The first exec was the connect canary, run before create() returned.
    expect(execsOf(handle.id)[0]?.slice(0, 2)).toEqual(['sh', '-c']);
  });

  it('builds an image once per provider and reuses it; secrets by name reach the sandbox env', async () => {
    f.server.defineSecret('api-keys', { API_KEY: 'sekret' });
    const spec = { ...modalTestSpec(), secrets: ['api-keys'] };
    const a = await f.provider.create(spec);
    const b = await f.provider.create({ ...spec, tags: { ...spec.tags, slot: 's2' } });
    handles.push(a, b);
    expect(f.server.faults.calls('ImageGetOrCreate')).toBe(1);
    expect(f.server.sandbox(a.id)?.imageId).toBe(f.server.sandbox(b.id)?.imageId);
    expect((await a.exec(['sh', '-c', 'printf %s "$API_KEY"'])).stdout).toBe('sekret');
  });

  it('an image by Modal id (im-…) is looked up, not built; an unknown id is a configuration error', async () => {
    const built = await create('built');
    const imageId = f.server.sandbox(built.id)!.imageId;
    const byId = await f.provider.create({ ...modalTestSpec('by-id'), image: imageId });
    handles.push(byId);
    expect(f.server.sandbox(byId.id)?.imageId).toBe(imageId);
    expect(f.server.faults.calls('ImageFromId')).toBe(1);
    await expect(f.provider.create({ ...modalTestSpec('nope'), image: 'im-doesnotexist' })).rejects.toBeInstanceOf(ProviderInvalidError);
  });

  it('honours spec.timeoutMs as the sandbox lifetime, and mounts configured volumes', async () => {
    await f.cleanup();
    f = await modalFixture({ volumes: { '/data': 'lanes-cache' } });
    const handle = await f.provider.create({ ...modalTestSpec(), timeoutMs: 60_000 });
    handles.push(handle);
    expect(f.server.sandbox(handle.id)).toMatchObject({ lifetimeMs: 60_000, volumes: { '/data': 'lanes-cache' } });
  });

  // The SDK rejects any timeout that is not whole seconds (a plain Error, read as an outage before).
  it('rounds a sandbox lifetime up to whole seconds', async () => {
    const handle = await f.provider.create({ ...modalTestSpec(), timeoutMs: 60_500 });
    handles.push(handle);
    expect(f.server.sandbox(handle.id)?.lifetimeMs).toBe(61_000);
  });

  it('rounds the canary timeout (the connect deadline) up to whole seconds', async () => {
    const handle = await create('s1', { connectTimeoutMs: 1_500 });
    expect(f.server.sandbox(handle.id)?.execs[0]?.timeoutMs).toBe(2_000);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, -1_000])('a sandbox lifetime of %s is a configuration error naming the value, and nothing is created', async (timeoutMs) => {
    const error = await f.provider.create({ ...modalTestSpec(), timeoutMs }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderInvalidError);
    expect((error as Error).message).toContain(`sandbox timeoutMs must be a positive, finite number of milliseconds, got ${timeoutMs}`);
    expect(f.server.faults.calls('SandboxCreateV2')).toBe(0);
  });

  it.each([
    ['a transport failure (UNAVAILABLE) on create', () => f.server.faults.fail('SandboxCreateV2', { times: SDK_CONTROL_ATTEMPTS }), ProviderUnavailableError],
    ['an unknown secret', () => undefined, ProviderInvalidError],
    ['an image that fails to build', () => f.server.failImageBuilds('debian:bookworm-slim'), ProviderInvalidError],
    ['permission denied', () => f.server.faults.fail('SandboxCreateV2', { code: Status.PERMISSION_DENIED }), ProviderInvalidError],
  ])('maps %s to the taxonomy and leaves no sandbox running', async (label, arrange, expected) => {
    arrange();
    const spec = label === 'an unknown secret' ? { ...modalTestSpec(), secrets: ['nope'] } : modalTestSpec();
    await expect(f.provider.create(spec)).rejects.toBeInstanceOf(expected);
    expect(f.server.runningSandboxIds()).toEqual([]);
  });

  it("a short UNAVAILABLE burst on create is absorbed by the SDK's own retries", async () => {
    f.server.faults.fail('SandboxCreateV2', { times: SDK_CONTROL_ATTEMPTS - 1 });
    await create();
    expect(f.server.faults.calls('SandboxCreateV2')).toBe(SDK_CONTROL_ATTEMPTS);
  });

  it('an image without sh/setsid fails its canary as invalid, and the sandbox is terminated', async () => {
    const spec = { ...modalTestSpec(), env: { PATH: '/nonexistent' } };
    await expect(f.provider.create(spec)).rejects.toBeInstanceOf(ProviderInvalidError);
    await waitFor('the failed sandbox to be terminated', () => f.server.runningSandboxIds().length === 0);
  });

  it('connect timeout: a sandbox that never answers its canary is terminated by id; ConnectTimeoutError names it', async () => {
    // Warm: app, image and channels are ready, so create itself fits the connect deadline easily.
    await create('warm');
    f.server.faults.delay('TaskExecStart', 10_000);
    const error = await f.provider.create(modalTestSpec(), { connectTimeoutMs: 1_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectTimeoutError);
    const id = (error as ConnectTimeoutError).sandboxId;
    expect(id).toMatch(/^sb-/);
    await waitFor('the half-created sandbox to be terminated', () => f.server.sandbox(id!)?.running === false);
    expect(f.server.sandbox(id!)?.exitCode).toBe(137);
    expect(f.server.faults.calls('SandboxTerminateV2')).toBe(1);
  });

  it('connect timeout while create itself is slow: the sandbox is reaped as soon as the SDK returns it', async () => {
    f.server.faults.delay('SandboxCreateV2', 600);
    const error = await f.provider.create(modalTestSpec(), { connectTimeoutMs: 100 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectTimeoutError);
    expect((error as ConnectTimeoutError).sandboxId).toBeUndefined();
    // Nothing is left burning compute once the late create lands.
    await waitFor('the late sandbox to be terminated', () => f.server.faults.calls('SandboxTerminateV2') > 0, { timeoutMs: 5_000 });
    await waitFor('no sandbox left running', () => f.server.runningSandboxIds().length === 0);
  });

  it('an aborted create leaves nothing behind', async () => {
    f.server.faults.delay('TaskExecStart', 5_000);
    const abort = new AbortController();
    const pending = f.provider.create(modalTestSpec(), { signal: abort.signal });
    await waitFor('create to reach the canary', () => f.server.runningSandboxIds().length === 1);
    abort.abort();
    await expect(pending).rejects.toBeDefined();
    await waitFor('the sandbox to be terminated', () => f.server.runningSandboxIds().length === 0);
  });
});

describe('ModalProvider.list / terminateById', () => {
  it('lists running sandboxes by tags and terminates by id (fromId + terminate); already gone is success', async () => {
    const a = await create('a');
    const b = await create('b');
    expect((await f.provider.list({ lane: 'contract' })).map((r) => r.id).sort()).toEqual([a.id, b.id].sort());
    expect(await f.provider.list({ slot: 'b' })).toEqual([{ id: b.id, tags: modalTestSpec('b').tags }]);
    expect(await f.provider.list({ lane: 'other' })).toEqual([]);

    await f.provider.terminateById(a.id);
    expect(f.server.sandbox(a.id)).toMatchObject({ running: false, exitCode: 137 });
    expect((await f.provider.list()).map((r) => r.id)).toEqual([b.id]);
    await f.provider.terminateById(a.id);
    await f.provider.terminateById('sb-never-existed');
    // The handle sees the death that happened elsewhere.
    expect(await a.poll()).toEqual({ state: 'exited', exitCode: 137 });
    await expect(a.exec(['true'])).rejects.toBeInstanceOf(SandboxGoneError);
  });

  it('a sweep lists with tags in one call per page: no per-sandbox tag fetch (SandboxListV2 carries the tags)', async () => {
    const made = [await create('a'), await create('b'), await create('c')];
    f.server.faults.resetCounts();
    const refs = await f.provider.list({ lane: 'contract' });
    expect(refs.map((r) => r.id).sort()).toEqual(made.map((h) => h.id).sort());
    expect(refs.find((r) => r.id === made[1]!.id)?.tags).toEqual(modalTestSpec('b').tags);
    expect(f.server.faults.calls('SandboxTagsGetV2')).toBe(0);
    // The page, then the empty page that ends the listing (the SDK's own paging).
    expect(f.server.faults.calls('SandboxListV2')).toBe(2);
  });

  it('list and terminateById that the control plane never answers fail at their deadline (the SDK sets none)', async () => {
    await f.cleanup();
    f = await modalFixture({ callTimeoutMs: 500 });
    const a = await create();
    f.server.faults.delay('SandboxListV2', 60_000);
    f.server.faults.delay('SandboxTerminateV2', 60_000);
    await expect(f.provider.list({ lane: 'contract' })).rejects.toBeInstanceOf(ProviderUnavailableError);
    await expect(f.provider.terminateById(a.id)).rejects.toBeInstanceOf(ProviderUnavailableError);
  });

  it('a transport failure during terminateById is not "already gone"', async () => {
    const a = await create();
    f.server.faults.fail('SandboxTerminateV2', { times: SDK_CONTROL_ATTEMPTS });
    await expect(f.provider.terminateById(a.id)).rejects.toBeInstanceOf(ProviderUnavailableError);
    expect(f.server.sandbox(a.id)?.running).toBe(true);
  });
});
