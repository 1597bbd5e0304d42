import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { SseFrameParser, type SseFrame } from '@lanes/client';

/**
 * An SSE client on a bare TCP socket, so a test decides when it reads: `read: false` sends the request
 * and then never reads, as a stalled client does, until `resume()`. HTTP/1.1 chunked bodies are de-chunked here.
 */
export class RawSseClient {
  status: number | undefined;
  /** The de-chunked body as text, comments included. */
  text = '';
  readonly frames: SseFrame[] = [];
  /** The terminating chunk arrived (the server ended the stream). */
  ended = false;
  /** The socket closed, by either side. */
  closed = false;
  private head = Buffer.alloc(0);
  private pending = Buffer.alloc(0);
  private readonly parser = new SseFrameParser();
  private readonly decoder = new TextDecoder();

  private constructor(readonly socket: Socket) {
    socket.on('close', () => {
      this.closed = true;
    });
    socket.on('error', () => undefined); // a reset shows as `closed`
  }

  static async open(port: number, path: string, headers: Record<string, string> = {}, { read = true } = {}): Promise<RawSseClient> {
    const socket = connect(port, '127.0.0.1');
    if (!read) socket.pause();
    await once(socket, 'connect');
    const client = new RawSseClient(socket);
    const lines = Object.entries({ host: `127.0.0.1:${port}`, accept: 'text/event-stream', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`);
    socket.write(`GET ${path} HTTP/1.1\r\n${lines.join('')}\r\n`);
    if (read) client.resume();
    return client;
  }

  resume(): void {
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.resume();
  }

  close(): void {
    this.socket.destroy();
  }

  /** Ids of the frames that carried an event (id-only frames move the resume point only). */
  eventIds(): string[] {
    return this.frames.filter((f) => f.data !== undefined && f.id).map((f) => f.id!);
  }

  /** Where this client would resume: the last `id:` it parsed. */
  lastId(): string | undefined {
    return this.frames.findLast((f) => f.id)?.id;
  }

  private onData(chunk: Buffer): void {
    if (this.status === undefined) {
      this.head = Buffer.concat([this.head, chunk]);
      const end = this.head.indexOf('\r\n\r\n');
      if (end < 0) return;
      this.status = Number(/^HTTP\/1\.1 (\d{3})/.exec(this.head.subarray(0, end).toString())?.[1]);
      chunk = this.head.subarray(end + 4);
    }
    this.pending = Buffer.concat([this.pending, chunk]);
    for (;;) {
      const eol = this.pending.indexOf('\r\n');
      if (eol < 0) return;
      const size = Number.parseInt(this.pending.subarray(0, eol).toString(), 16);
      if (Number.isNaN(size)) return; // a non-chunked (error) body: status is what the test reads
      if (size === 0) {
        this.ended = true;
        return;
      }
      if (this.pending.length < eol + 2 + size + 2) return;
      const text = this.decoder.decode(this.pending.subarray(eol + 2, eol + 2 + size), { stream: true });
      this.pending = this.pending.subarray(eol + 2 + size + 2);
      this.text += text;
      this.frames.push(...this.parser.push(text));
    }
  }
}
