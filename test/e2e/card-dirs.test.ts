import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
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
