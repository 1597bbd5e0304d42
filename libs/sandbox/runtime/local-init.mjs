// The root of one local sandbox. Runs on bare `node` (no tsx, no build) and is spoken to by the host
// over its stdio, one JSON object per line:
//   host → init  {op:'ping',id} | {op:'exec',id,argv,cwd?,env?,timeoutMs?,graceMs?,endLeftovers?} | {op:'cancel',id}
//   init → host  {t:'pong',id} | {t:'started',id,pid} | {t:'out',id,s:1|2,d} | {t:'exit',id,code,timedOut,cancelled,alone}
//                | {t:'ending',code} (the init is ending the sandbox and will exit with code)
// The namespace's shell writes one more line on the same channel while this init starts, the start
// canary's ({t:'canary',nonce} or {t:'canary-failed'}; src/local/start-canary.ts).
// Each command runs in its own session/process group so a cancel can kill exactly that command.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants } from 'node:os';
import { StringDecoder } from 'node:string_decoder';
import { killTree } from './kill-escalation.mjs';
import { UNREADABLE_SETTLE_MS, readStat, scanEnvEntry, unreadableTracker } from './proc.mjs';

const SANDBOX_ID = process.env.LANES_SANDBOX_ID ?? 'unknown';
const WORKDIR = process.env.LANES_SANDBOX_WORKDIR || process.cwd();
const LIFETIME_MS = Number(process.env.LANES_SANDBOX_LIFETIME_MS ?? '0');
/** Mirrors DEFAULT_KILL_GRACE_MS in @lanes/contracts; the host normally sends graceMs explicitly. */
const DEFAULT_GRACE_MS = 500;
/**
 * After the leader exits, how long to wait for its stdout/stderr to reach EOF. A background child
 * that kept the pipes open must not hold the result hostage (the shell's `cmd &` idiom).
 */
const STDIO_DRAIN_MS = 100;
/** Exit code of the init when the sandbox lifetime backstop fires (GNU timeout's convention). */
const LIFETIME_EXIT_CODE = 124;
const EXEC_ID_ENV = 'LANES_EXEC_ID';
const SANDBOX_ID_ENV = 'LANES_SANDBOX_ID';
/** The fd of the lifeline: the host holds the other end, so it reads EOF the moment the host dies. */
const LIFELINE_FD_ENV = 'LANES_SANDBOX_LIFELINE_FD';
/** Exit code of the init when its host (the worker) died: nobody is left to read the result. */
const HOST_GONE_EXIT_CODE = 125;
/**
 * Exit code of the init when a command cannot start because the sandbox's processes are at their
 * cap (RLIMIT_NPROC, separate-uid): whatever holds the places (a fork bomb's leftovers) would fail
 * every card after, so the sandbox ends, and the host replaces it as it would a dead one.
 */
const PROCESS_CAP_EXIT_CODE = 126;
/** While ending, sweep the sandbox's processes this often until none is left... */
const END_SWEEP_INTERVAL_MS = 10;
/** ...but exit after this long regardless; in a PID namespace our exit takes the rest with it. */
const END_SWEEP_LIMIT_MS = 500;

const LIFELINE_FD = Number(process.env[LIFELINE_FD_ENV] ?? '-1');
// Commands have no use for it.
delete process.env[LIFELINE_FD_ENV];
/** Set by the host for a sandbox in a PID namespace of its own: every process this init can see is the sandbox's. */
const OWN_PIDS = process.env.LANES_SANDBOX_OWN_PIDS === '1';
delete process.env.LANES_SANDBOX_OWN_PIDS;
// The shell unset it before starting this init; never a command's, whatever started the init.
delete process.env.LANES_SANDBOX_CANARY;

// Once the host is gone (worker SIGKILLed) writes fail with EPIPE. The sandbox must survive that so
// the supervisor can reap it by id, so channel errors are swallowed, never fatal.
let hostGone = false;
process.stdout.on('error', () => {
  hostGone = true;
});
process.stderr.on('error', () => {});
process.stdin.on('error', () => {});
process.on('SIGPIPE', () => {});

/** False when the channel to the host is full: what is read from a command waits until it drains. */
function send(message) {
  if (hostGone) return true;
  return process.stdout.write(`${JSON.stringify(message)}\n`);
}

// Nothing else would keep the event loop busy after stdin EOF with no command running.
setInterval(() => {}, 2 ** 31 - 1);

/** Running commands by host-assigned id. Forgotten on exit, so a recycled pgid is never killed later. */
const commands = new Map();

let pendingInput = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pendingInput += chunk;
  let newline = pendingInput.indexOf('\n');
  while (newline !== -1) {
    const line = pendingInput.slice(0, newline);
    pendingInput = pendingInput.slice(newline + 1);
    if (line.length > 0) dispatch(line);
    newline = pendingInput.indexOf('\n');
  }
});

function dispatch(line) {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    process.stderr.write(`lanes-init: unparseable control line ignored\n`);
    return;
  }
  switch (message.op) {
    case 'ping':
      send({ t: 'pong', id: message.id });
      return;
    case 'exec':
      startCommand(message);
      return;
    case 'cancel':
      commands.get(message.id)?.stop('cancelled');
      return;
    default:
      process.stderr.write(`lanes-init: unknown op ${String(message.op)}\n`);
  }
}

function startCommand({ id, argv, cwd, env, timeoutMs, graceMs, endLeftovers }) {
  const execTag = `${SANDBOX_ID}:${id}`;
  let child;
  try {
    child = spawn(argv[0], argv.slice(1), {
      cwd: cwd || WORKDIR,
      env: env ? { ...process.env, ...env, [EXEC_ID_ENV]: execTag } : { ...process.env, [EXEC_ID_ENV]: execTag },
      // setsid(): own session and process group, so the group can be signalled as a unit.
      detached: true,
      // Never inherit stdin: it is the control channel.
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    spawnFailed(id, argv, cwd, error);
    return;
  }
  if (child.pid === undefined) {
    // spawn() reports ENOENT/EACCES asynchronously through 'error'.
    child.once('error', (error) => spawnFailed(id, argv, cwd, error));
    return;
  }
  const pid = child.pid;
  /** stopReason: 'timeout' | 'cancelled' once a kill started; stopping: that kill's promise. */
  const command = { stopReason: undefined, stopping: undefined, exited: false, stop: (_reason) => {} };
  commands.set(id, command);
  send({ t: 'started', id, pid });

  const decoders = [new StringDecoder('utf8'), new StringDecoder('utf8')];
  // A command can print faster than the host reads (which it does at a bounded rate): its output
  // stops being read while the channel is full, so the command waits on its own pipe and this init
  // holds one chunk, not everything it printed. Once the command has exited, what is left is read
  // whatever the channel (the tail is where the error is; STDIO_DRAIN_MS bounds it).
  let draining = false;
  const forward = (stream, index) => {
    stream.on('data', (chunk) => {
      const text = decoders[index].write(chunk);
      if (text.length === 0 || send({ t: 'out', id, s: index + 1, d: text }) || draining) return;
      stream.pause();
      process.stdout.once('drain', () => stream.resume());
    });
  };
  forward(child.stdout, 0);
  forward(child.stderr, 1);
  const stdioClosed = new Promise((resolve) => child.once('close', resolve));

  command.stop = (reason) => {
    if (command.exited || command.stopReason) return;
    command.stopReason = reason;
    command.stopping = killTree({
      pgid: pid,
      leaderPid: pid,
      envMarker: `${EXEC_ID_ENV}=${execTag}`,
      graceMs: graceMs ?? DEFAULT_GRACE_MS,
    });
  };
  const timer = timeoutMs > 0 ? setTimeout(() => command.stop('timeout'), timeoutMs) : undefined;

  child.once('exit', async (code, signal) => {
    command.exited = true;
    if (timer) clearTimeout(timer);
    const exitCode = code ?? 128 + (constants.signals[signal] ?? 0);
    draining = true;
    child.stdout.resume();
    child.stderr.resume();
    let drainTimer;
    await Promise.race([
      stdioClosed,
      new Promise((resolve) => {
        drainTimer = setTimeout(resolve, STDIO_DRAIN_MS);
      }),
    ]);
    clearTimeout(drainTimer);
    child.stdout.destroy();
    child.stderr.destroy();
    // A cancelled command is reported only once its whole tree is gone, so "resolved" means "safe
    // to run the next command".
    if (command.stopping) await command.stopping;
    for (let index = 0; index < 2; index += 1) {
      const rest = decoders[index].end();
      if (rest.length > 0) send({ t: 'out', id, s: index + 1, d: rest });
    }
    // The command stays in `commands` until its exit is sent: a sandbox that ends meanwhile
    // (endSandbox) reports it first and exits only once `commands` is empty.
    const othersRunning = commands.size > 1;
    let alone = !othersRunning && aloneInSandbox();
    // A card's last command: nothing it left running may reach the next card (an ending sandbox
    // takes everything with it anyway).
    if (endLeftovers && !othersRunning && !alone && !ending) {
      await killLeftovers();
      alone = aloneInSandbox();
    }
    commands.delete(id);
    send({
      t: 'exit',
      id,
      code: exitCode,
      timedOut: command.stopReason === 'timeout',
      cancelled: command.stopReason === 'cancelled',
      alone,
    });
  });
}

/**
 * Whether nothing but the namespace's pid 1 (the sh that waits for us) and this init is left: no
 * command and no process a command left behind. The host then knows no process can hold, or write
 * into, a finished card's directories. Only a PID namespace (its own /proc) can say so; in a
 * process group /proc is the host's, and the answer is always false.
 */
function aloneInSandbox() {
  const self = String(process.pid);
  try {
    for (const name of readdirSync('/proc')) {
      const c = name.charCodeAt(0);
      if (c >= 48 && c <= 57 && name !== '1' && name !== self) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** A command that could not start; one the process cap stopped ends the sandbox (PROCESS_CAP_EXIT_CODE). */
function spawnFailed(id, argv, cwd, error) {
  if (error?.code !== 'EAGAIN') return reportSpawnFailure(id, argv, cwd, error);
  // No exit for this command: the host learns of it as of any command a sandbox's death cut short.
  process.stderr.write(`lanes-init: cannot start ${JSON.stringify(argv[0])}: the sandbox is at its process cap (EAGAIN); ending it\n`);
  endSandbox(PROCESS_CAP_EXIT_CODE);
}

/** Shell conventions: 127 "not found", 126 "found but could not run". */
function reportSpawnFailure(id, argv, cwd, error) {
  const code = error?.code === 'ENOENT' ? 127 : 126;
  const detail = `lanes-init: cannot run ${JSON.stringify(argv[0])} in ${JSON.stringify(cwd || WORKDIR)}: ${error?.code ?? error}\n`;
  send({ t: 'out', id, s: 2, d: detail });
  send({ t: 'exit', id, code, timedOut: false, cancelled: false });
}

/**
 * A pass that SIGKILLs every process carrying this sandbox's id but this init and its parent (in a
 * namespace, pid 1). Every member is born after this init; one caught mid-exec reads as unreadable
 * and is read again. Each call returns whether none is left and none unreadable is still settling.
 */
function markedKiller() {
  const exclude = new Set([process.pid, process.ppid]);
  const bornSince = readStat(process.pid)?.startTime;
  const unreadable = unreadableTracker(UNREADABLE_SETTLE_MS);
  return () => {
    const found = scanEnvEntry(`${SANDBOX_ID_ENV}=${SANDBOX_ID}`, exclude, bornSince);
    for (const p of found.members) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    return found.members.length === 0 && unreadable.settling(found.unreadable) === 0;
  };
}

/** Runs `pass` every END_SWEEP_INTERVAL_MS until it says done, or END_SWEEP_LIMIT_MS have gone; then `then`. */
function sweepUntil(pass, then) {
  const deadline = Date.now() + END_SWEEP_LIMIT_MS;
  const sweep = () => {
    if (pass() || Date.now() > deadline) then();
    else setTimeout(sweep, END_SWEEP_INTERVAL_MS);
  };
  sweep();
}

/**
 * Kills what a finished command left running: every process of the sandbox but this init and pid
 * 1. In a PID namespace that is every process this init sees (`kill -1` reaches the namespace's
 * alone, and spares its pid 1 and the caller), a daemon that dropped its environment too; in a
 * process group, the processes that carry the sandbox's id.
 */
function killLeftovers() {
  const killMarked = markedKiller();
  const killSeen = () => {
    try {
      process.kill(-1, 'SIGKILL');
    } catch {
      // none left to signal
    }
    return aloneInSandbox();
  };
  return new Promise((resolve) => sweepUntil(OWN_PIDS ? killSeen : killMarked, resolve));
}

/**
 * Ends the whole sandbox. Inside a PID namespace our exit takes everything with it (pid 1 is the
 * sh that waits for us); in a plain process group commands run in their own sessions, so every
 * process carrying this sandbox's id is SIGKILLed, pass after pass until none is left, first.
 * The host is told first, and each command killed here is reported like any exit (137, with its
 * output) before this process exits, as Modal reports the execs of a task it ends; a poll between
 * that report and the exit must not find the sandbox live (the host reads `ending`).
 */
let ending = false;
function endSandbox(exitCode) {
  if (ending) return;
  ending = true;
  send({ t: 'ending', code: exitCode });
  const killMarked = markedKiller();
  // `commands` empties as each killed command's exit is sent (after its output drains).
  sweepUntil(
    () => killMarked() && commands.size === 0,
    () => process.exit(exitCode),
  );
}

if (LIFELINE_FD >= 0) {
  // Lifeline: the sandbox ends with its host, even a SIGKILLed one (the kernel closes the host's end,
  // and we read EOF), so no agent goes on working a card nobody owns. The host never writes on it.
  try {
    const lifeline = new Socket({ fd: LIFELINE_FD, readable: true, writable: false });
    lifeline.on('data', () => {});
    lifeline.once('end', () => endSandbox(HOST_GONE_EXIT_CODE));
    lifeline.once('close', () => endSandbox(HOST_GONE_EXIT_CODE));
    lifeline.on('error', () => endSandbox(HOST_GONE_EXIT_CODE));
  } catch (error) {
    process.stderr.write(`lanes-init: cannot watch lifeline fd ${LIFELINE_FD}: ${error?.message ?? error}\n`);
    process.exit(HOST_GONE_EXIT_CODE);
  }
}

if (LIFETIME_MS > 0) {
  // Backstop for sandboxes nobody reaps (owner and supervisor both gone).
  setTimeout(() => endSandbox(LIFETIME_EXIT_CODE), LIFETIME_MS);
}
