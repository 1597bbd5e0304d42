import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AgentFileError } from '@lanes/contracts';
import type { ExecResult, SandboxHandle } from '@lanes/sandbox';
import { type OutputChars, runModalCommand } from '../src/modal/modal-exec.js';
import { modalFixture, modalTestSpec, type ModalFixture } from './support/modal-fixture.js';

// Every command the handle runs goes through here; the spy shows what the worker collected.
vi.mock('../src/modal/modal-exec.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../src/modal/modal-exec.js')>();
  return { ...real, runModalCommand: vi.fn(real.runModalCommand) };
});

// ModalSandboxHandle.readFile on the real SDK over the local Modal server: what an agent leaves is
// read in one bounded exec, however the file changes under it.

const MAX_BYTES = 1_000;
/** base64 of MAX_BYTES + 1 bytes, and a generous allowance for the verdict line. */
const BOUND_CHARS = 4 * Math.ceil((MAX_BYTES + 1) / 3) + 1_024;
const ORIGINAL = '{"ok":true}\n';
const REAL = (tool: string) => execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim();

let f: ModalFixture;
let shims: string;
const handles: SandboxHandle[] = [];

beforeEach(async () => {
  vi.mocked(runModalCommand).mockClear();
  f = await modalFixture({ fileOpTimeoutMs: 5_000 });
  shims = mkdtempSync(join(f.server.rootDir, 'shims-'));
});

afterEach(async () => {
  for (const h of handles.splice(0)) await h.terminate().catch(() => undefined);
  await f.cleanup();
});

/** A sandbox whose PATH starts with the shim directory, so a test can stand in for a tool the read uses. */
async function create(): Promise<SandboxHandle> {
  const spec = modalTestSpec();
  const handle = await f.provider.create({ ...spec, env: { ...spec.env, PATH: `${shims}:${process.env['PATH'] ?? '/usr/bin:/bin'}` } });
  handles.push(handle);
  return handle;
}

/** `tool` in the sandbox becomes this script (the agent acting at the moment lanes runs it). */
function shim(tool: string, script: string): void {
  const path = join(shims, tool);
  writeFileSync(path, `#!/bin/sh\n${script}\n`);
  chmodSync(path, 0o755);
}

/** The execs the server started from `from` on, and what each sent on stdout. */
function execsSince(handle: SandboxHandle, from: number) {
  return (f.server.sandbox(handle.id)?.execs ?? []).slice(from);
}

async function readsOf(): Promise<Array<{ keep: OutputChars | undefined; result: ExecResult }>> {
  const mock = vi.mocked(runModalCommand).mock;
  const results = await Promise.allSettled(mock.results.map((r) => r.value as Promise<ExecResult>));
  return mock.calls.flatMap((call, i) => {
    const settled = results[i];
    return settled?.status === 'fulfilled' ? [{ keep: call[3], result: settled.value }] : [];
  });
}

async function refusal(p: Promise<unknown>): Promise<AgentFileError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AgentFileError);
  return error as AgentFileError;
}

async function setUp(handle: SandboxHandle, script: string): Promise<number> {
  expect((await handle.exec(['sh', '-c', script], { cwd: handle.workdir })).exitCode).toBe(0);
  vi.mocked(runModalCommand).mockClear();
  return f.server.sandbox(handle.id)?.execs.length ?? 0;
}

describe('ModalSandboxHandle.readFile: one bounded exec', () => {
  it("bytes 0..255 come back whole through one lanes exec; the SDK's readBytes (its fs helper) is not used", async () => {
    const handle = await create();
    const binary = new Uint8Array(256).map((_, i) => i);
    await handle.writeFile('out/bytes.bin', binary);
    const from = await setUp(handle, 'true');
    expect(await handle.readFile('out/bytes.bin')).toEqual(binary);
    const execs = execsSince(handle, from);
    // One exec, and it is lanes' read (the SDK's fs helper would be a second, with its own argv).
    expect(execs.map((e) => e.argv.includes('lanes-read-file'))).toEqual([true]);
  });

  it('a regular file of exactly maxBytes is read; one byte more is too large, and nothing of it is sent', async () => {
    const handle = await create();
    const from = await setUp(handle, `mkdir -p out && head -c ${MAX_BYTES} /dev/zero > out/at.json && head -c ${MAX_BYTES + 1} /dev/zero > out/over.json`);
    expect((await handle.readFile('out/at.json', { maxBytes: MAX_BYTES }))?.byteLength).toBe(MAX_BYTES);
    const over = await refusal(handle.readFile('out/over.json', { maxBytes: MAX_BYTES }));
    expect([over.rule, over.message]).toEqual(['too-large', 'over.json is 1,001 bytes (limit 1,000 bytes)']);
    expect(Math.max(...execsSince(handle, from).map((e) => e.stdoutBytes))).toBeLessThanOrEqual(BOUND_CHARS);
  });

  it('a file that grows after its size was taken is read no further than maxBytes + 1: too large, and the sandbox sent at most the bound', async () => {
    const handle = await create();
    // The agent's daemon appends 5 MB right after lanes measured the file.
    shim('wc', `${REAL('wc')} "$@"; rc=$?; ${REAL('head')} -c 5000000 /dev/zero >> '${handle.workdir}/out/result.json'; exit $rc`);
    const from = await setUp(handle, `mkdir -p out && printf '%s' '${ORIGINAL}' > out/result.json`);
    const grew = await refusal(handle.readFile('out/result.json', { maxBytes: MAX_BYTES }));
    expect([grew.rule, grew.message]).toEqual(['too-large', 'result.json grew past 1,001 bytes (limit 1,000 bytes)']);
    for (const exec of execsSince(handle, from)) expect(exec.stdoutBytes).toBeLessThanOrEqual(BOUND_CHARS);
  });

  it.each([
    ['a link to a 5 MB file', `${REAL('head')} -c 5000000 /dev/zero > big.bin && ln -s big.bin swap`],
    ['a link to /dev/zero', 'ln -s /dev/zero swap'],
    ['a FIFO', 'mkfifo swap'],
  ])('result.json swapped for %s once lanes opened it: what was checked is what is read', async (_what, make) => {
    const handle = await create();
    const out = `${handle.workdir}/out`;
    shim('wc', `${REAL('wc')} "$@"; rc=$?; cd '${out}' && ${make} && mv -f swap result.json; exit $rc`);
    const from = await setUp(handle, `mkdir -p out && printf '%s' '${ORIGINAL}' > out/result.json`);
    expect(new TextDecoder().decode(await handle.readFile('out/result.json', { maxBytes: MAX_BYTES }))).toBe(ORIGINAL);
    // The swap did happen: the path now names the replacement.
    expect((await handle.exec(['sh', '-c', '[ -L out/result.json ] || [ -p out/result.json ]'])).exitCode).toBe(0);
    for (const exec of execsSince(handle, from)) expect(exec.stdoutBytes).toBeLessThanOrEqual(BOUND_CHARS);
  });

  it('tools in the sandbox that ignore the cap (a lying wc, a head that sends everything) cannot make the worker hold more than the bound', async () => {
    const handle = await create();
    shim('wc', 'echo 10');
    shim('head', `exec ${REAL('cat')}`);
    const from = await setUp(handle, `mkdir -p out && ${REAL('head')} -c 5000000 /dev/zero > out/result.json`);
    const error = await refusal(handle.readFile('out/result.json', { maxBytes: MAX_BYTES }));
    expect(error.rule).toBe('too-large');
    // The sandbox sent the whole 5 MB in base64; the worker kept no more than the read's own cap.
    expect(Math.max(...execsSince(handle, from).map((e) => e.stdoutBytes))).toBeGreaterThan(5_000_000);
    const reads = await readsOf();
    expect(reads).toHaveLength(1);
    const [read] = reads;
    expect(read?.keep?.stdout).toBeLessThanOrEqual(BOUND_CHARS);
    // stderr only carries the shell's complaints: a few KiB, not the command default (1 MiB).
    expect(read?.keep?.stderr).toBeLessThanOrEqual(8_192);
    expect(read?.result.stdout.length).toBeLessThanOrEqual(read?.keep?.stdout ?? 0);
  });

  it('a read that blocks (standing in for a FIFO swapped in before the open) ends at the file deadline as the agent’s failure; the sandbox serves the next command', async () => {
    await f.cleanup();
    f = await modalFixture({ fileOpTimeoutMs: 1_000 });
    shims = mkdtempSync(join(f.server.rootDir, 'shims-'));
    const handle = await create();
    shim('head', 'exec sleep 30');
    await setUp(handle, `mkdir -p out && printf '%s' '${ORIGINAL}' > out/result.json`);
    const started = Date.now();
    const blocked = await refusal(handle.readFile('out/result.json'));
    expect([blocked.rule, blocked.message]).toEqual(['not-regular', 'result.json could not be read within the file deadline']);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect((await handle.exec(['echo', 'next'])).stdout).toBe('next\n');
  });
});
