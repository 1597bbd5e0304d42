import { ServerError, Status, type CallContext, type ServerMiddleware } from 'nice-grpc';
import { jwtExpiry, type Handlers } from './control-plane.js';
import type { ExecExit, ServerExec } from './exec-process.js';
import type { ServerSandbox } from './sandbox.js';
import type { ModalServerState } from './state.js';

// Requests are the SDK's generated message objects, whose types the bundle does not export.
type Req = any;

/** Largest data frame of one TaskExecStdioRead message. */
const STDIO_CHUNK_BYTES = 1 << 20;

/**
 * How the command router behaves where Modal's own behaviour has more than one form. The defaults
 * are Modal's (what its sources say, see docs/modal.md); each field can be switched to the other
 * form, so a test can run both.
 */
export interface RouterBehaviour {
  /**
   * What the router answers about a task whose sandbox has finished. Default NOT_FOUND: Modal's
   * client says "If just the task shuts down, the task command router will return a NOT_FOUND
   * error" (modal-client `task_command_router_client.py`, `exec_wait`), and the JS SDK's filesystem
   * API reads NOT_FOUND as "This Sandbox may have already shut down". The other form, UNAVAILABLE,
   * is the task and its worker both gone: the SDK retries it (exec start ~10 s, exec wait forever),
   * so only a control-plane poll tells.
   */
  finishedTaskCode: Status;
  /**
   * What an exec wait (and stdio read) already waiting on a command gets when the command's task
   * ends under it (terminate, lifetime, a death from outside):
   * - `exit-137` (default): the command's exit status, the SIGKILL the task's end sent it (the SDK
   *   reads signal 9 as 128 + 9 = 137); its output is drained to EOF. Modal's router protocol
   *   carries only a code or a signal for an exec's end, with "TODO: Give a way for the user to
   *   distinguish between normal exit and termination by Modal (due to task timeout, exec exceeded
   *   deadline, etc.)" (modal-client `modal_proto/task_command_router.proto`, TaskExecWaitResponse).
   * - `error`: `finishedTaskCode`, as for every call after the end.
   * Calls made after the end get `finishedTaskCode` in both forms.
   */
  execsAtTaskEnd: 'exit-137' | 'error';
}

/** Modal's behaviour, as far as its sources tell (docs/modal.md). */
export const DEFAULT_ROUTER_BEHAVIOUR: Readonly<RouterBehaviour> = { finishedTaskCode: Status.NOT_FOUND, execsAtTaskEnd: 'exit-137' };

/**
 * The router's token check: a call whose bearer token (the JWT the control plane handed out) has
 * expired is refused UNAUTHENTICATED, which makes the SDK fetch a new one (SandboxGetCommandRouterAccess)
 * and try again (`TaskCommandRouterClientImpl.callWithAuthRetry` / `refreshJwt` in modal@0.11.1).
 * Checked when a call starts: a stream or long-poll that began with a good token runs on.
 */
export function routerAuthMiddleware(now: () => number = Date.now): ServerMiddleware {
  return async function* auth(call, context: CallContext) {
    const header = context.metadata.get('authorization');
    const token = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice('Bearer '.length) : undefined;
    const exp = token === undefined ? undefined : jwtExpiry(token);
    if (exp === undefined) throw new ServerError(Status.UNAUTHENTICATED, 'missing or malformed router token');
    if (exp * 1000 <= now()) throw new ServerError(Status.UNAUTHENTICATED, 'router token expired');
    return yield* call.next(call.request, context);
  };
}

function exitMessage(exit: ExecExit | undefined): object {
  if (!exit) return {};
  return 'code' in exit ? { code: exit.code } : { signal: exit.signal };
}

/**
 * The task command router (`modal.task_command_router.TaskCommandRouter`): exec start, stdio,
 * stdin, poll and wait for the commands of one sandbox's task, on real local processes.
 */
export function commandRouter(state: ModalServerState, behaviour: RouterBehaviour): Handlers {
  const gone = (sandbox: ServerSandbox): ServerError => new ServerError(behaviour.finishedTaskCode, `task ${sandbox.taskId} of sandbox ${sandbox.id} is not running`);

  const liveTask = (taskId: string): ServerSandbox => {
    const sandbox = state.sandboxByTask(taskId);
    if (!sandbox) throw new ServerError(Status.NOT_FOUND, `task ${taskId} not found`);
    if (!sandbox.running) throw gone(sandbox);
    return sandbox;
  };

  /** A call already waiting when the task ended reports the command's end as its exit status (behaviour.execsAtTaskEnd). */
  const reportsExit = (exec: ServerExec): boolean => behaviour.execsAtTaskEnd === 'exit-137' && exec.endedWithTask;

  const execOf = (req: { taskId: string; execId: string }): [ServerSandbox, ServerExec] => {
    const sandbox = liveTask(req.taskId);
    const exec = sandbox.execs.get(req.execId);
    if (!exec) throw new ServerError(Status.NOT_FOUND, `exec ${req.execId} not found`);
    return [sandbox, exec];
  };

  return {
    taskExecStart: async (req: Req) => {
      const sandbox = liveTask(req.taskId);
      // A retried start (same exec id) must not run the command twice.
      if (sandbox.execs.has(req.execId)) return {};
      const env: Record<string, string> = {};
      for (const source of req.secretSources ?? []) {
        if (source.secretId) Object.assign(env, state.secretById(source.secretId)?.env ?? {});
        Object.assign(env, source.env?.contents ?? {});
      }
      Object.assign(env, req.env ?? {});
      sandbox.exec({
        execId: req.execId,
        argv: req.commandArgs,
        cwd: req.workdir ?? sandbox.workdir ?? sandbox.dir,
        env,
        ...(req.timeoutSecs ? { timeoutMs: req.timeoutSecs * 1000 } : {}),
      });
      return {};
    },

    taskExecStdioRead: async function* (req: Req, context: CallContext) {
      const [sandbox, exec] = execOf(req);
      const fd = req.fileDescriptor === 1 ? 1 : 0;
      let offset: number = req.offset ?? 0;
      for (;;) {
        const ended = !sandbox.running;
        if (ended && !reportsExit(exec)) throw gone(sandbox);
        const data = exec.outputFrom(fd, offset);
        if (data.length > 0) {
          for (let at = 0; at < data.length; at += STDIO_CHUNK_BYTES) yield { data: data.subarray(at, at + STDIO_CHUNK_BYTES) };
          offset += data.length;
          continue;
        }
        // The task's end closed the command's pipes: what it wrote has been sent.
        if (exec.outputClosed[fd] || ended) return;
        await exec.changed(context.signal);
        if (context.signal.aborted) return;
      }
    },

    taskExecWait: async (req: Req, context: CallContext) => {
      const [sandbox, exec] = execOf(req);
      for (;;) {
        if (exec.exit && (sandbox.running || reportsExit(exec))) return exitMessage(exec.exit);
        // Otherwise the container's death is seen before its processes' exits: their router is gone with it.
        if (!sandbox.running) throw gone(sandbox);
        await exec.changed(context.signal);
        if (context.signal.aborted) throw new ServerError(Status.CANCELLED, 'wait cancelled by the client');
      }
    },

    taskExecPoll: async (req: Req) => exitMessage(execOf(req)[1].exit),

    taskExecStdinWriteStream: async (requests: AsyncIterable<Req>) => {
      let exec: ServerExec | undefined;
      for await (const r of requests) {
        if (r.start) {
          exec = execOf(r.start)[1];
          // Resuming: bytes the exec already has are not written twice.
          if (r.start.offset !== exec.stdinBytesWritten) {
            throw new ServerError(Status.FAILED_PRECONDITION, `stdin offset ${r.start.offset} != ${exec.stdinBytesWritten}`);
          }
        } else if (r.data && exec) {
          exec.writeStdin(r.data);
        } else if (r.end && exec) {
          exec.closeStdin();
        }
      }
      return {};
    },

    taskExecStdinStatus: async (req: Req) => {
      const exec = execOf(req)[1];
      return { numBytesWritten: exec.stdinBytesWritten, closed: exec.stdinClosed };
    },

    taskExecStdinWrite: async (req: Req) => {
      const exec = execOf(req)[1];
      const data: Uint8Array = req.data ?? new Uint8Array(0);
      const skip = exec.stdinBytesWritten - (req.offset ?? 0);
      if (skip < data.length) exec.writeStdin(data.subarray(Math.max(0, skip)));
      if (req.eof) exec.closeStdin();
      return {};
    },
  };
}
