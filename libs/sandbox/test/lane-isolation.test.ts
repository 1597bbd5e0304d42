import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LaneIsolation } from '@lanes/contracts';
import { firstUnreadablePath, resolveLaneIsolation, type IsolationCapabilities } from '../src/local/lane-isolation.js';

const ALL: IsolationCapabilities = { pidNamespace: true, separateUid: { ok: true } };
const NO_UID: IsolationCapabilities = { pidNamespace: true, separateUid: { ok: false, why: 'the worker is not root' } };
const NOTHING: IsolationCapabilities = { pidNamespace: false, separateUid: { ok: false, why: 'the worker is not root' } };

describe('resolveLaneIsolation', () => {
  it.each<
    [string, { provider: 'local' | 'modal'; isolation: 'auto' | 'separate-uid' | 'pid-namespace' | 'process-group' }, IsolationCapabilities, string | undefined, LaneIsolation]
  >([
    ['auto, everything allowed', { provider: 'local', isolation: 'auto' }, ALL, undefined, { mode: 'separate-uid', trustedAgentsOnly: false }],
    ['auto, not root', { provider: 'local', isolation: 'auto' }, NO_UID, undefined, { mode: 'pid-namespace', trustedAgentsOnly: true, why: 'the worker is not root' }],
    [
      'auto, no namespace',
      { provider: 'local', isolation: 'auto' },
      NOTHING,
      undefined,
      { mode: 'process-group', trustedAgentsOnly: true, why: 'this machine does not allow a PID namespace (unshare --pid)' },
    ],
    [
      'auto, the agent where only root may look',
      { provider: 'local', isolation: 'auto' },
      ALL,
      '/root/agent.sh',
      { mode: 'pid-namespace', trustedAgentsOnly: true, why: "/root/agent.sh is not readable by other users, so an agent uid could not run the lane's commands" },
    ],
    [
      'separate-uid as set, agent unreadable: kept, and said',
      { provider: 'local', isolation: 'separate-uid' },
      ALL,
      '/root/agent.sh',
      { mode: 'separate-uid', trustedAgentsOnly: false, why: "/root/agent.sh is not readable by other users: the lane's commands will fail" },
    ],
    ['pid-namespace as set', { provider: 'local', isolation: 'pid-namespace' }, ALL, undefined, { mode: 'pid-namespace', trustedAgentsOnly: true, why: 'set by the lane' }],
    ['process-group as set', { provider: 'local', isolation: 'process-group' }, ALL, undefined, { mode: 'process-group', trustedAgentsOnly: true, why: 'set by the lane' }],
    ['modal: its own machine', { provider: 'modal', isolation: 'auto' }, NOTHING, undefined, { mode: 'modal', trustedAgentsOnly: false }],
  ])('%s', (_name, lane, machine, unreadable, expected) => {
    expect(resolveLaneIsolation(lane, machine, unreadable)).toEqual(expected);
  });
});

describe('firstUnreadablePath', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lanes-unreadable-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('names a directory others cannot pass, a file they cannot read, and passes readable or missing paths', () => {
    chmodSync(dir, 0o755);
    writeFileSync(join(dir, 'open.sh'), 'true', { mode: 0o644 });
    writeFileSync(join(dir, 'closed.sh'), 'true', { mode: 0o600 });
    expect(firstUnreadablePath({ agent: ['bash', join(dir, 'open.sh')], setup: [] })).toBeUndefined();
    expect(firstUnreadablePath({ agent: ['bash', join(dir, 'missing.sh')], setup: [] })).toBeUndefined();
    expect(firstUnreadablePath({ agent: ['bash', join(dir, 'open.sh')], setup: [['sh', join(dir, 'closed.sh')]] })).toBe(join(dir, 'closed.sh'));
    chmodSync(dir, 0o700);
    expect(firstUnreadablePath({ agent: ['bash', join(dir, 'open.sh')], setup: [] })).toBe(dir);
    chmodSync(dir, 0o755);
  });
});
