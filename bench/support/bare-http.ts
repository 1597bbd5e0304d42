/**
 * The enqueue bench's HTTP baseline: a bare Fastify route that hands what it is posted to BullMQ
 * and nothing else (no validation, no records, no auth, no logging). `{cards: […]}` is one
 * `Queue.addBulk`, a single card one `Queue.add`, each card's id its job id; the replies have
 * lanes' shape. What it reaches is the most any HTTP API in front of BullMQ can reach on this
 * machine with this client, so lanes' figures are printed against it as well as against `addBulk`.
 */
import Fastify from 'fastify';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';

type Posted = { id: string } & Record<string, unknown>;
/** A bulk body or one card; nothing is validated, as nothing is in a bare route. */
type Body = Posted & { cards?: Posted[] };

export interface BareHttp {
  url: string;
  close(): Promise<void>;
}

export async function startBareHttp(redisUrl: string, queueName: string, prefix: string): Promise<BareHttp> {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue(queueName, { connection, prefix });
  const app = Fastify({ bodyLimit: 16 * 1024 * 1024 });
  app.post('/v1/cards', async (request, reply) => {
    const body = request.body as Body;
    if (body.cards) {
      await queue.addBulk(body.cards.map((card) => ({ name: 'card', data: card, opts: { jobId: card.id } })));
      return reply.code(202).send({ cards: body.cards.map((card) => ({ id: card.id, state: 'queued', created: true })) });
    }
    await queue.add('card', body, { jobId: body.id });
    return reply.code(202).send({ id: body.id, state: 'queued' });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (!address || typeof address !== 'object') throw new Error('bare HTTP server has no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    async close() {
      await app.close();
      await queue.close();
      connection.disconnect();
    },
  };
}
