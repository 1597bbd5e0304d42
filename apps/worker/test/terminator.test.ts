import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderUnavailableError } from '@lanes/contracts';
import { createLocalProvider, type LocalSandboxProvider, type SandboxProvider } from '@lanes/sandbox';
import { Terminator } from '../src/terminator.js';
import { testLog } from '../../../test/harness/index.js';

describe('Terminator: terminate by id until confirmed', () => {
  let dir: string;
  let local: LocalSandboxProvider;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'lanes-terminator-'));
    local = createLocalProvider({ baseDir: dir });
  });
  afterAll(async () => {
    await local?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The real local provider, whose first `refusals` terminates fail as an unreachable provider would. */
  const flaky = (refusals: number): SandboxProvider & { calls: number } => {
    const p = {
      calls: 0,
      name: local.name,
      create: local.create.bind(local),
      list: local.list.bind(local),
      close: async () => undefined,
      terminateById: async (id: string) => {
        p.calls++;
        if (p.calls <= refusals) throw new ProviderUnavailableError('local', 'injected: terminate refused');
        await local.terminateById(id);
      },
    };
    return p;
  };

  it('a refused terminate stays pending and is retried until the sandbox is really gone', async () => {
    const handle = await local.create({ image: 'local', tags: { lane: 't', slot: '0', worker: `w-${process.pid}` } });
    const provider = flaky(2);
    const terminator = new Terminator({ provider, log: testLog() });

    await terminator.terminate(handle.id, 'dead');
    expect(terminator.pending()).toEqual([handle.id]);
    expect((await handle.poll()).state).toBe('live');

    await terminator.retryPending();
    expect(terminator.pending()).toEqual([handle.id]);

    await terminator.retryPending();
    expect(terminator.pending()).toEqual([]);
    expect(provider.calls).toBe(3);
    expect((await handle.poll()).state).not.toBe('live');
  });

  it('a terminate that goes through at once leaves nothing pending, and "already gone" is success', async () => {
    const handle = await local.create({ image: 'local', tags: { lane: 't', slot: '1', worker: `w-${process.pid}` } });
    const terminator = new Terminator({ provider: flaky(0), log: testLog() });
    await terminator.terminate(handle.id, 'dead');
    await terminator.terminate(handle.id, 'dead again');
    expect(terminator.pending()).toEqual([]);
  });
});
