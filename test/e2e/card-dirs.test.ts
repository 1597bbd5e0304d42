import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
// The module the stack loads under the @lanes/source condition: its prototype is the one the stack's sandboxes use.
import { LocalSandbox } from '../../libs/sandbox/src/local/local-sandbox.js';
import { useRedis } from '../harness/index.js';

const agent = [process.execPath, DEMO_AGENT];

describe("a long-lived sandbox does not keep every card's files", () => {
  const f = useRedis();

  it("each card's directory goes when the next card starts in the same sandbox: at most the last one is left", async () => {
    const t = await f.stack([{ name: 'dirs', slots: 1, agent }]);
    const ids = ['dirs-1', 'dirs-2', 'dirs-3'];
    const sandboxes = new Set<string>();
    for (const id of ids) {
      await t.api.request('POST', '/v1/cards', { id, lane: 'dirs', title: `card ${id}` });
      sandboxes.add((await t.api.waitCard(id, 'done', (c) => c.state === 'done')).sandboxId!);
    }
    // One sandbox ran all three: the test is about what it keeps.
    expect(sandboxes.size).toBe(1);
    const handle = t.stack.worker!.lanes.get('dirs')!.pool.slots[0]!.handle!;
    expect(readdirSync(join(handle.workdir, 'cards'))).toEqual(['dirs-3']);
  });
});

describe("a card's files go in while its move to running travels", () => {
  const f = useRedis();

  it('the move to running is sent before the card’s directories are reset (their file work overlaps its round trip)', async () => {
    const order: string[] = [];
    type Sendable = { sendCommand: (command: { name: string; args: unknown[] }, stream?: unknown) => unknown };
    const proto = Redis.prototype as unknown as Sendable;
    const sendCommand = proto.sendCommand;
    // The card write script's target state follows the sha, the key count and the keys.
    proto.sendCommand = function (this: Sendable, command, stream) {
      if (command.name === 'evalsha' && command.args[2 + Number(command.args[1])] === 'running') order.push(`move ${String(command.args[2]).split(':').at(-1)}`);
      return sendCommand.call(this, command, stream);
    };
    const resetDirs = LocalSandbox.prototype.resetDirs;
    LocalSandbox.prototype.resetDirs = function (this: LocalSandbox, paths, options) {
      order.push(`reset ${paths[0]?.split('/cards/')[1]?.split('/')[0]}`);
      return resetDirs.call(this, paths, options);
    };
    try {
      const t = await f.stack([{ name: 'order', slots: 1, agent }]);
      const ids = ['order-1', 'order-2', 'order-3'];
      for (const id of ids) {
        await t.api.request('POST', '/v1/cards', { id, lane: 'order', title: `card ${id}` });
        await t.api.waitCard(id, 'done', (c) => c.state === 'done');
      }
      for (const id of ids) {
        expect(order).toContain(`move ${id}`);
        expect(order.indexOf(`move ${id}`)).toBeLessThan(order.indexOf(`reset ${id}`));
      }
    } finally {
      proto.sendCommand = sendCommand;
      LocalSandbox.prototype.resetDirs = resetDirs;
    }
  });
});
