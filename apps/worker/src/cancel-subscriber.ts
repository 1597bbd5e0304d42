import type { Redis } from 'ioredis';

/**
 * A connection subscribed to one channel, kept subscribed across reconnects by lanes rather than
 * by ioredis. ioredis's own resubscribe (`autoResubscribe`) sends SUBSCRIBE on reconnect with no
 * handler on its promise: when the connection is closed before Redis answers (a worker stopping
 * just as Redis comes back), that is an unhandled rejection, "Connection is closed.", which Node
 * treats as a crash. Here every SUBSCRIBE has its handler.
 */
export async function subscribeKept(
  from: Redis,
  channel: string,
  handlers: {
    onMessage: (message: string) => void;
    onError: (label: string, err: Error) => void;
    /** Subscribed again after a reconnect: whatever was published meanwhile went unheard. */
    onResubscribed?: () => void;
  },
): Promise<Redis> {
  const conn = from.duplicate({ autoResubscribe: false });
  conn.on('error', (err: Error) => handlers.onError('connection error', err));
  conn.on('message', (ch: string, message: string) => {
    if (ch === channel) handlers.onMessage(message);
  });
  try {
    await conn.subscribe(channel);
  } catch (err) {
    conn.disconnect();
    throw err;
  }
  // Every 'ready' from now on is a reconnect.
  conn.on('ready', () => {
    conn.subscribe(channel).then(
      () => handlers.onResubscribed?.(),
      (err: Error) => handlers.onError('resubscribe failed', err),
    );
  });
  return conn;
}
