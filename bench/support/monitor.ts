/**
 * A MONITOR reader on a plain socket. ioredis's monitor mode drops its connection under load
 * ("Command queue state error"): lines that arrive in the same read as MONITOR's `+OK`, before it
 * has switched modes, are taken for replies to commands it never sent. Here every line after the
 * `+OK` is a command Redis ran, by construction.
 *
 * Each MONITOR line is `+<time> [<db> <source>] "<command>" "<arg>" …`, where `<source>` is
 * `lua` or the client's `ip:port`; Redis escapes quotes and control characters inside the
 * quotes, so a line never holds a raw CR or LF.
 */
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';

export type MonitorListener = (command: string, source: string) => void;

export interface Monitor {
  /** Called for every command Redis runs from now on, with its name in lower case. */
  onCommand(listener: MonitorListener): void;
  close(): void;
}

const LINE = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] "((?:[^"\\]|\\.)*)"/;

export async function startMonitor(redisUrl: string): Promise<Monitor> {
  const { hostname, port } = new URL(redisUrl);
  const socket: Socket = connect({ host: hostname, port: Number(port) });
  await once(socket, 'connect');
  const listeners: MonitorListener[] = [];
  let buffered = '';
  let confirmed = false;
  const ready = new Promise<void>((resolve, reject) => {
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      let start = 0;
      for (let end = buffered.indexOf('\r\n'); end !== -1; end = buffered.indexOf('\r\n', start)) {
        const line = buffered.slice(start, end);
        start = end + 2;
        if (!confirmed) {
          if (line !== '+OK') return reject(new Error(`MONITOR answered ${line}`));
          confirmed = true;
          resolve();
          continue;
        }
        const m = LINE.exec(line);
        if (m) for (const listener of listeners) listener(m[2]!.toLowerCase(), m[1]!);
      }
      buffered = buffered.slice(start);
    });
  });
  socket.write('MONITOR\r\n');
  await ready;
  return {
    onCommand(listener) {
      listeners.push(listener);
    },
    close() {
      socket.destroy();
    },
  };
}
