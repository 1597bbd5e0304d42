import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/harness/index.js';
import type { SseEvent } from '../src/sse/sse-event.js';
import { SseStream, type SseEndReason, type SseStreamConfig } from '../src/sse/sse-stream.js';

const frameOf = (id: string, lane: string, payloadBytes = 10): SseEvent => {
  const frame = `id: ${id}\nevent: card.queued\ndata: ${'x'.repeat(payloadBytes)}\n\n`;
  return { id, lane, frame, bytes: Buffer.byteLength(frame) };
};

interface Harness {
  stream: SseStream;
  res: ServerResponse;
  ends: Array<{ reason: SseEndReason; resumeId: string }>;
  closes: number;
  client: Socket;
  received(): string;
}

/** SseStream on a real HTTP response, and a raw client socket the test can pause or close. */
describe('SseStream on a real socket', () => {
  const servers: Server[] = [];
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
  });

  async function open(config: Partial<SseStreamConfig> = {}, { read = true, highWaterMark }: { read?: boolean; highWaterMark?: number } = {}): Promise<Harness> {
    let made: ((h: Omit<Harness, 'client' | 'received'>) => void) | undefined;
    const ready = new Promise<Omit<Harness, 'client' | 'received'>>((r) => {
      made = r;
    });
    const server = createServer(highWaterMark ? { highWaterMark } : {}, (_req, res) => {
      const h = {
        res,
        ends: [] as Harness['ends'],
        closes: 0,
        stream: undefined as unknown as SseStream,
      };
      h.stream = new SseStream(
        res,
        (lane) => lane !== 'hidden',
        { maxBufferedBytes: 256 * 1024, keepaliveMs: 60_000, endGraceMs: 200, ...config },
        {
          onEnd: (reason, resumeId) => h.ends.push({ reason, resumeId }),
          onClose: () => {
            h.closes++;
          },
        },
      );
      made?.(h);
    });
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as { port: number }).port;
    const client = connect(port, '127.0.0.1');
    sockets.push(client);
    let text = '';
    client.on('data', (d: Buffer) => (text += d.toString()));
    if (!read) client.pause();
    client.on('error', () => undefined);
    await once(client, 'connect');
    client.write('GET /v1/events HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
    return Object.assign(await ready, { client, received: () => text });
  }

  it('a stream that never began is discarded by end(): it stops counting, writes nothing, and ignores later calls', async () => {
    const h = await open();
    expect(h.stream.status).toBe('new');
    expect(h.stream.isOpen).toBe(true);
    h.stream.end('server-closing');
    expect(h.stream.status).toBe('closed');
    expect(h.closes).toBe(1);
    expect(h.ends).toEqual([]);
    h.stream.discard();
    h.stream.begin('1-0');
    h.stream.push([frameOf('2-0', 'a')]);
    h.stream.end('slow-consumer');
    expect(h.closes).toBe(1);
    expect(h.res.headersSent).toBe(false);
    // The socket is still the server's: the route answers with an error of its own.
    h.res.writeHead(503).end('nope');
    await waitFor('the 503', () => h.received().startsWith('HTTP/1.1 503'));
  });

  it('sends only accepted lanes, moves its resume id past hidden ones, and ends with that id', async () => {
    const h = await open();
    h.stream.begin('5-0');
    expect(h.stream.status).toBe('open');
    h.stream.begin('9-0'); // a second begin is ignored
    h.stream.push([frameOf('6-0', 'a'), frameOf('7-0', 'hidden')]);
    expect(h.stream.needsDrain).toBe(false);
    await h.stream.drained();
    h.stream.end('server-closing');
    expect(h.stream.status).toBe('ending');
    h.stream.end('server-closing'); // ending already: nothing more
    expect(h.ends).toEqual([{ reason: 'server-closing', resumeId: '7-0' }]);
    await once(h.client, 'end');
    const text = h.received();
    expect(text).toContain(': lanes events\nid: 5-0\n\n');
    expect(text).toContain('id: 6-0\n');
    expect(text).not.toContain('id: 7-0\nevent');
    expect(text).toMatch(/: the server is closing; reconnect with Last-Event-ID\nid: 7-0\n\n/);
    await waitFor('the close hook', () => h.closes === 1);
    expect(h.stream.status).toBe('closed');
  });

  it('a quiet stream gets keepalive comments', async () => {
    const h = await open({ keepaliveMs: 20 });
    h.stream.begin('1-0');
    await waitFor('two keepalives', () => h.received().split(': keepalive').length > 2);
    h.client.destroy();
    await waitFor('the client-closed hook', () => h.closes === 1);
    expect(h.ends).toEqual([{ reason: 'client-closed', resumeId: '1-0' }]);
  });

  it('a client that stops reading is dropped as slow-consumer when even a keepalive would pass the cap, and its socket is destroyed after the grace', async () => {
    const h = await open({ keepaliveMs: 20, maxBufferedBytes: 1024, endGraceMs: 100 }, { read: false });
    h.stream.begin('1-0');
    await waitFor('the opening frame flushed', () => h.res.writableLength === 0);
    // One frame larger than any socket buffer: an empty buffer takes it whole, and it stays unsent.
    h.stream.push([frameOf('2-0', 'a', 32 * 1024 * 1024)]);
    expect(h.stream.needsDrain).toBe(true);
    const drained = h.stream.drained();
    await waitFor('the slow-consumer drop', () => h.ends.length === 1);
    expect(h.ends).toEqual([{ reason: 'slow-consumer', resumeId: '2-0' }]);
    // The client never reads, so the last frame cannot flush: the grace destroys the socket, and drained() resolves.
    await drained;
    await waitFor('the close hook', () => h.closes === 1);
    expect(h.stream.status).toBe('closed');
  });

  // Node 22 raised the default high-water mark to 64 KiB; a cap below the socket's mark must still pace a catch-up.
  it('a catch-up paced by needsDrain/drained stays under a cap smaller than the socket high-water mark, and the client gets every event', async () => {
    const h = await open({ maxBufferedBytes: 16 * 1024 }, { read: false, highWaterMark: 1024 * 1024 });
    h.stream.begin('0-0');
    const ids: string[] = [];
    let resumed = false;
    for (let i = 1; i <= 400 && h.stream.isOpen; i++) {
      const id = `${i}-0`;
      ids.push(id);
      h.stream.push([frameOf(id, 'a', 1_000)]);
      if (h.stream.needsDrain) {
        if (!resumed) {
          resumed = true;
          h.client.resume();
        }
        await h.stream.drained();
      }
    }
    expect(h.ends).toEqual([]);
    expect(h.stream.status).toBe('open');
    await waitFor('every event at the client', () => h.received().includes('id: 400-0\n'));
    expect(ids).toHaveLength(400);
  });
});
