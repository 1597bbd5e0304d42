import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP relay in front of the command router, so a test can drop the SDK's router connections
 * mid-stream (`dropAll`) exactly as a broken network would: the sockets die, the server lives, and
 * the SDK has to redial and resume.
 */
export class RouterProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #port = 0;

  constructor(targetPort: number) {
    this.#server = createServer((client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('error', () => {});
        s.once('close', () => {
          this.#sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  get port(): number {
    return this.#port;
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = this.#server.address();
    this.#port = typeof address === 'object' && address ? address.port : 0;
    return this.#port;
  }

  /** Destroys every open connection; new ones are accepted as before. Returns how many were dropped. */
  dropAll(): number {
    const n = this.#sockets.size;
    for (const s of [...this.#sockets]) s.destroy();
    return n;
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
