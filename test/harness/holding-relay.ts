import { once } from 'node:events';
import { type AddressInfo, type Socket, connect, createServer } from 'node:net';

/**
 * A TCP relay to Redis that can hold what Redis sends one of its connections (numbered as they
 * came), so a test can keep a reader behind what others write without a sleep.
 */
export async function holdingRelay(redisUrl: string) {
  const target = new URL(redisUrl);
  const links: Array<{ held: boolean; backlog: Buffer[]; client: Socket }> = [];
  const sockets: Socket[] = [];
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    const link = { held: false, backlog: [] as Buffer[], client };
    links.push(link);
    sockets.push(client, upstream);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => (link.held ? link.backlog.push(chunk) : client.write(chunk)));
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => links.length,
    hold: (i: number) => {
      links[i]!.held = true;
    },
    release: (i: number) => {
      const link = links[i]!;
      link.held = false;
      for (const chunk of link.backlog.splice(0)) link.client.write(chunk);
    },
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}
