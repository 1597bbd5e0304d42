import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readLogFacts } from './logs.js';

describe('readLogFacts', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'lanes-soak-logs-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const write = (file: string, lines: Array<Record<string, unknown> | string>) =>
    writeFileSync(join(dir, file), `${lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n')}\n`);

  it('keeps a sandbox.reaped line that names no sandbox, so the verdict can count it as unjudgeable', () => {
    write('supervisor.log', [
      { time: 1, event: 'sandbox.reaped', sandboxId: 'sb-1', slot: 'w-soak-0', reason: 'orphan' },
      { time: 2, event: 'sandbox.reaped', slot: 'w-soak-1', reason: 'orphan' },
      { time: 3, event: 'sandbox.reaped' },
    ]);
    const facts = readLogFacts(dir);
    expect(facts.reaps).toEqual([{ atMs: 1, sandboxId: 'sb-1', slot: 'w-soak-0', reason: 'orphan' }]);
    expect(facts.unnamedReaps).toEqual([{ atMs: 2, slot: 'w-soak-1', reason: 'orphan' }, { atMs: 3 }]);
  });

  it('reads worker ids, forgotten workers and dead sandboxes, and skips a line cut short by a kill -9', () => {
    write('worker-0.0.log', ['not json', { time: 5, worker: 'host-1-aaaa' }, { time: 6, event: 'sandbox.dead', sandboxId: 'sb-2' }, '{"time":7,"event":"sandbox.de']);
    write('supervisor.log', [{ time: 8, event: 'worker.forgotten', worker: 'host-1-aaaa' }]);
    const facts = readLogFacts(dir);
    expect(Object.fromEntries(facts.workerIds)).toEqual({ 'worker-0.0': 'host-1-aaaa' });
    expect(facts.forgotten).toEqual([{ atMs: 8, worker: 'host-1-aaaa' }]);
    expect([...facts.deadSandboxes]).toEqual(['sb-2']);
  });

  it("reads what each worker said it did to its own sandboxes, and nobody else's lines", () => {
    write('worker-0.1.log', [
      { time: 1, event: 'sandbox.recycled', sandboxId: 'sb-1', reason: 'older than sandboxRecycleAfterMs' },
      { time: 2, event: 'sandbox.live', sandboxId: 'sb-2' },
      { time: 3, event: 'sandbox.dead', sandboxId: 'sb-2', reason: 'poll: sandbox exited(137)' },
      { time: 4, event: 'sandbox.released' },
    ]);
    write('supervisor.log', [{ time: 5, event: 'sandbox.terminated', sandboxId: 'sb-3' }]);
    expect(readLogFacts(dir).sandboxEnds).toEqual([
      { atMs: 1, label: 'worker-0.1', sandboxId: 'sb-1', event: 'sandbox.recycled', reason: 'older than sandboxRecycleAfterMs' },
      { atMs: 3, label: 'worker-0.1', sandboxId: 'sb-2', event: 'sandbox.dead', reason: 'poll: sandbox exited(137)' },
    ]);
  });
});
