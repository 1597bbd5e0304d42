#!/usr/bin/env node
// The soak's agent. It is plain JavaScript on purpose: it starts thousands of times inside
// sandboxes, and a TypeScript loader would cost each start more CPU than the agent itself.
//
// It keeps the soak's own ledger (JSON lines in SOAK_LEDGER, outside every sandbox): a `start`
// record when it begins, an `end` record when it finishes or is interrupted, and a `concurrent`
// record when it meets another live run of the same card.
//
// How a concurrent run is detected, even when one of the runs is SIGKILLed and never writes its end:
// every run listens on its own unix socket, SOAK_RUNS_DIR/<card>/<run>.sock, for as long as it
// lives. The kernel closes a listener the moment its process dies (however it dies), so a
// connection that is accepted proves that run is alive right now; a refused one proves it is not.
// Pathname sockets work across network and PID namespaces (sandboxes have their own PID namespace,
// so pids cannot be compared across them; workers may have their own network namespace).
// Each run: listen → scan the card's other sockets → work → scan again → close.
// If two runs' work overlaps, at least one of them sees the other: take the run whose first scan
// came second (B). The other run (A) was listening before its own, earlier, scan and keeps
// listening until after its work ends. If A had closed before B's scan, A's work would have ended
// before B's work began, so they did not overlap. Hence B's scan finds A alive.
import { appendFileSync, mkdirSync, readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/** A live run answers at once; a stopped but live one never does, and still counts as alive. */
const ANSWER_TIMEOUT_MS = 1_000;
const DEFAULT_WORK_MS = 1_000;

const env = process.env;
const ledger = env.SOAK_LEDGER;
const runsDir = env.SOAK_RUNS_DIR;
if (!ledger || !runsDir) {
  console.error('SOAK_LEDGER and SOAK_RUNS_DIR must be set');
  process.exit(2);
}
const card = env.LANES_CARD_ID ?? 'unknown';
const self = {
  card,
  run: randomBytes(4).toString('hex'),
  attempt: Number(env.LANES_ATTEMPT ?? 0),
  sandbox: env.LANES_SANDBOX_ID ?? 'unknown',
  pid: process.pid,
};
let workMs = DEFAULT_WORK_MS;
try {
  const parsed = JSON.parse(readFileSync(env.LANES_CARD_FILE, 'utf8'));
  if (Number.isFinite(parsed?.metadata?.workMs)) workMs = parsed.metadata.workMs;
} catch {
  // no card file: the default work
}

/** One line per write, opened with O_APPEND: lines of concurrent writers never interleave. */
const record = (type, extra = {}) => appendFileSync(ledger, `${JSON.stringify({ type, ...self, at: Date.now(), ...extra })}\n`);

// Runs of one card may be different uids (separate-uid sandboxes): the card's directory and every
// run's socket are open to all, so each run can listen there, connect to the others' sockets and
// remove a dead run's. The ledger is made writable for all by the soak.
process.umask(0);
const cardDir = join(runsDir, card);
mkdirSync(cardDir, { recursive: true, mode: 0o777 });
const socketPath = join(cardDir, `${self.run}.sock`);
const server = createServer((socket) => socket.end(JSON.stringify(self)));
server.on('error', (err) => {
  console.error(`ledger socket: ${err.message}`);
});
await new Promise((resolve, reject) => {
  server.once('listening', resolve);
  server.once('error', reject);
  server.listen(socketPath);
});

/** Resolves with the other run's identity if it is alive, `undefined` if it is gone. */
function ask(path) {
  return new Promise((resolve) => {
    const socket = createConnection(path);
    let data = '';
    let connected = false;
    const done = (alive) => {
      clearTimeout(timer);
      socket.destroy();
      if (!alive) return resolve(undefined);
      try {
        resolve(JSON.parse(data));
      } catch {
        resolve({ run: path, unanswered: true });
      }
    };
    const timer = setTimeout(() => done(connected), ANSWER_TIMEOUT_MS);
    socket.on('connect', () => (connected = true));
    socket.on('data', (chunk) => (data += chunk));
    socket.on('end', () => done(true));
    socket.on('error', () => done(connected && data.length > 0));
  });
}

async function scan(phase) {
  for (const name of readdirSync(cardDir)) {
    if (!name.endsWith('.sock') || name === `${self.run}.sock`) continue;
    const path = join(cardDir, name);
    const other = await ask(path);
    if (other) record('concurrent', { phase, other });
    else {
      try {
        unlinkSync(path); // the socket of a run that died; nobody listens there any more
      } catch {
        // another run removed it first
      }
    }
  }
}

let finished = false;
const finish = (outcome, code) => {
  if (finished) return;
  finished = true;
  record('end', { outcome });
  server.close();
  try {
    unlinkSync(socketPath);
  } catch {
    // already gone
  }
  process.exit(code);
};
// Cancel and timeout send SIGINT, then SIGTERM: the run ends, and says so.
process.on('SIGINT', () => finish('interrupted', 130));
process.on('SIGTERM', () => finish('terminated', 143));

record('start', { workMs });
await scan('start');
await new Promise((resolve) => setTimeout(resolve, workMs));
await scan('end');
finish('ok', 0);
