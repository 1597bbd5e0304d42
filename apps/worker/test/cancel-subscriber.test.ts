import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedis } from '@lanes/queue';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';
import { subscribeKept } from '../src/cancel-subscriber.js';

describe('the cancel subscriber keeps its subscription across a Redis restart', () => {
  let server: TestRedis | undefined;
  const conns: Redis[] = [];
  afterEach(async () => {
    for (const c of conns.splice(0)) c.disconnect();
    await server?.stop();
  });

  async function setUp() {
    server = await startRedis();
    const base = createRedis(server.url);
    base.on('error', () => undefined);
    conns.push(base);
    const messages: string[] = [];
    const errors: string[] = [];
    const resubscribed = { count: 0 };
    const sub = await subscribeKept(base, 'cancel-test', {
      onMessage: (m) => messages.push(m),
      onError: (label) => errors.push(label),
      onResubscribed: () => resubscribed.count++,
    });
    conns.push(sub);
    return { base, sub, messages, errors, resubscribed };
  }

  it('hears the channel, and hears it again after Redis restarts, saying it is back so that what was missed is read', async () => {
    const { base, sub, messages, errors, resubscribed } = await setUp();
    await base.publish('cancel-test', 'before');
    await waitFor('the message before the restart', () => messages.includes('before'));
    expect(resubscribed.count).toBe(0);
    await server!.kill();
    await server!.start();
    await waitFor('the subscriber to reconnect', () => sub.status === 'ready', { timeoutMs: 30_000 });
    // The resubscribe may land a moment after 'ready': publish until it is heard.
    await waitFor(
      'a message after the restart',
      async () => {
        await base.publish('cancel-test', 'after').catch(() => undefined);
        return messages.includes('after');
      },
      { timeoutMs: 30_000 },
    );
    expect(errors).not.toContain('resubscribe failed');
    expect(resubscribed.count).toBeGreaterThanOrEqual(1);
  });

  it("resubscribes itself, not through ioredis's autoResubscribe (whose SUBSCRIBE has no handler: closed before Redis answers, an unhandled rejection)", async () => {
    const { sub } = await setUp();
    expect(sub.options.autoResubscribe).toBe(false);
    // Closed at the reconnect's 'ready', just after its SUBSCRIBE went out: whatever Redis answers
    // first, nothing is left unhandled (vitest fails the run on an unhandled rejection).
    await server!.kill();
    const ended = new Promise((resolve) => sub.once('end', resolve));
    sub.once('ready', () => sub.disconnect());
    await server!.start();
    await ended;
  });
});
