import { createServer } from 'node:http';

export interface BoardReceiver {
  /** http://127.0.0.1:port; any path is taken. */
  url: string;
  /** Every callback in arrival order: its event and card id. */
  received: Array<{ event: string; cardId: string }>;
  close(): Promise<void>;
}

/** A board's callback endpoint on a real HTTP server: it records what arrives and answers 200. */
export async function startBoardReceiver(): Promise<BoardReceiver> {
  const received: BoardReceiver['received'] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as { event: string; card: { id: string } };
      received.push({ event: body.event, cardId: body.card.id });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    received,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
