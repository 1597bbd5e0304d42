// Starts sandbox roots for the process that forked it (the worker), so the worker itself never
// forks. A fork costs in proportion to the forking process's memory: the worker's ~200 MiB makes
// each spawn() hold its event loop 10–20 ms and leaves a page-fault storm behind, while this
// process stays at a fraction of that. Runs on bare `node` (no tsx, no build).
//
// Over the IPC channel (JSON), one message per line of this protocol:
//   host → spawner  {op:'spawn',id,command,args,cwd,env}
//   spawner → host  {t:'spawned',id,pid} then {t:'fd',id,fd} ×4 (each carrying that stdio socket: 0–2 and
//                   the lifeline, 3) | {t:'failed',id,message} | {t:'exit',id,code,signal}
// Each socket is handed over and this process's copy closed at once, so the worker alone holds the
// lifeline: the root reads EOF on it when the worker dies, however it dies. This process holds
// nothing the sandboxes need, and ends when the worker does (its channel closes).
import { spawn } from 'node:child_process';

const STDIO_FDS = 4;

process.on('disconnect', () => process.exit(0));
process.on('message', (message) => {
  if (message?.op !== 'spawn') return;
  const { id, command, args, cwd, env } = message;
  let root;
  try {
    // Own process group, no controlling terminal: a ^C aimed at the worker must not reach it.
    root = spawn(command, args, { cwd, env, detached: true, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
  } catch (error) {
    send({ t: 'failed', id, message: error instanceof Error ? error.message : String(error) });
    return;
  }
  if (root.pid === undefined) {
    root.once('error', (error) => send({ t: 'failed', id, message: error.message }));
    return;
  }
  // Node starts reading a child's output pipes at once, and what this process read would be lost
  // with its copies: nothing is read here, so the worker gets every byte (an early error's stderr).
  for (const stream of root.stdio) stream?._handle?.readStop();
  root.once('exit', (code, signal) => send({ t: 'exit', id, code, signal }));
  send({ t: 'spawned', id, pid: root.pid });
  // Node closes its copy of a handle once it is sent (keepOpen false).
  for (let fd = 0; fd < STDIO_FDS; fd++) send({ t: 'fd', id, fd }, root.stdio[fd]);
});

function send(message, handle) {
  // A closed channel means the worker is gone and its sandboxes with it: nothing left to tell.
  if (process.connected) process.send(message, handle, undefined, () => undefined);
}
