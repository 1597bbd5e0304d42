import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModalClient } from 'modal';
import { createServer, ServerError, Status, type Server } from 'nice-grpc';
import { findByEnvEntry } from '../../src/proc.js';
import { SANDBOX_ID_ENV } from '../../src/sandbox-reaper.js';
import { DEFAULT_ROUTER_BEHAVIOUR, commandRouter, routerAuthMiddleware, type RouterBehaviour } from './command-router.js';
import { DEFAULT_CONTROL_PLANE_BEHAVIOUR, controlPlane, type ControlPlaneBehaviour, type Handlers } from './control-plane.js';
import { modalDefinitions, type ServiceDefinition } from './definitions.js';
import { ModalFaults } from './faults.js';
import { faultMiddleware } from './faults.js';
import { RouterProxy } from './router-proxy.js';
import { GENERIC_STATUS } from './sandbox.js';
import { ModalServerState } from './state.js';

export { ModalFaults, type FailOptions, type RpcTarget } from './faults.js';
export { SDK_FS_TOOLS_PATH } from './exec-process.js';
export { PINNED_MODAL_SDK_VERSION } from './definitions.js';
export { GENERIC_STATUS } from './sandbox.js';
export { DEFAULT_ROUTER_BEHAVIOUR, type RouterBehaviour } from './command-router.js';
export { DEFAULT_CONTROL_PLANE_BEHAVIOUR, type ControlPlaneBehaviour } from './control-plane.js';

/** What a test can see of one sandbox on the server. */
export interface LocalSandboxInfo {
  id: string;
  appId: string;
  imageId: string;
  running: boolean;
  /** What the SDK's poll() returns for it: null while running, else 137 terminated, 124 lifetime, or the exit code. */
  exitCode: number | null;
  tags: Record<string, string>;
  env: Record<string, string>;
  /** mount path → volume name */
  volumes: Record<string, string>;
  lifetimeMs: number;
  dir: string;
  /**
   * Every exec the router started, in order: argv, the server-side timeout it was given, when it
   * started and ended (wall-clock ms; `endedAt` undefined while it runs), and how many bytes it has
   * written to stdout so far (what the sandbox sent, so an upper bound on what a client received).
   */
  execs: Array<{ argv: string[]; timeoutMs: number | undefined; cwd: string; startedAt: number; endedAt: number | undefined; stdoutBytes: number }>;
}

export interface LocalModalServer {
  /** The control-plane URL (`http://127.0.0.1:<port>`): localhost makes the SDK use insecure channels. */
  readonly url: string;
  /** The command-router URL the control plane hands out (`https://127.0.0.1:<port>`, through a droppable relay). */
  readonly routerUrl: string;
  /** Per-sandbox directories live here (under the test's TMPDIR, so the leak guard sees them). */
  readonly rootDir: string;
  readonly faults: ModalFaults;
  /**
   * How the router answers for a finished sandbox's task and for the commands running when it ends
   * (default: Modal's, DEFAULT_ROUTER_BEHAVIOUR). Mutable: a test may switch it at any time.
   */
  readonly router: RouterBehaviour;
  /** Listing tags and router-token lifetime (default DEFAULT_CONTROL_PLANE_BEHAVIOUR). Mutable. */
  readonly controlPlane: ControlPlaneBehaviour;
  /**
   * A real `ModalClient` (modal@0.11.1) pointed at this server with dummy credentials.
   * `maxThrottleWaitSecs`: as lanes' createModalClient sets it (MODAL_MAX_THROTTLE_WAIT_SECS);
   * unset, the SDK waits out a throttle as long as the server keeps asking.
   */
  client(params?: { maxThrottleWaitSecs?: number }): ModalClient;
  defineSecret(name: string, env: Record<string, string>): void;
  /** Image builds whose base registry tag is `tag` fail with `exception`. */
  failImageBuilds(tag: string, exception?: string): void;
  sandbox(id: string): LocalSandboxInfo | undefined;
  runningSandboxIds(): string[];
  /** The container dies from outside (host loss, OOM): polls exited(`exitCode`), every process is killed. */
  killSandbox(id: string, exitCode?: number): void;
  /** Terminated by someone else (another client, the dashboard): polls 137, as a terminate RPC would. */
  terminateSandbox(id: string): void;
  /** Drops every open connection to the command router (streams in flight break; the SDK redials). */
  dropRouterConnections(): number;
  /** Kills every sandbox, waits until their processes are gone, stops both servers, removes rootDir. */
  close(): Promise<void>;
}

const open = new Set<ModalServerState>();
// A test worker that exits without close() must not leave sandbox processes behind.
process.once('exit', () => {
  for (const state of open) {
    for (const sandbox of state.sandboxes.values()) {
      for (const p of findByEnvEntry(`${SANDBOX_ID_ENV}=${sandbox.id}`, new Set([process.pid]))) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
  }
});

/** Every method of `definition`: ours, and UNIMPLEMENTED for the rest (as a real server without them). */
function complete(definition: ServiceDefinition, handlers: Handlers): Handlers {
  const out: Handlers = {};
  for (const [name, method] of Object.entries(definition.methods)) {
    const streaming = (method as { responseStream?: boolean }).responseStream === true;
    const unimplemented = new ServerError(Status.UNIMPLEMENTED, `the local Modal server does not implement ${definition.name}.${name}`);
    out[name] =
      handlers[name] ??
      (streaming
        ? // biome-ignore lint/correctness/useYield: an unimplemented stream fails before its first message
          async function* () {
            throw unimplemented;
          }
        : async () => {
            throw unimplemented;
          });
  }
  return out;
}

export interface ModalServerOptions {
  /** Where the router's behaviour differs from Modal's default (DEFAULT_ROUTER_BEHAVIOUR). */
  router?: Partial<RouterBehaviour>;
  /** Where the control plane's differs from the default (DEFAULT_CONTROL_PLANE_BEHAVIOUR). */
  controlPlane?: Partial<ControlPlaneBehaviour>;
}

/** Starts a local Modal server (control plane + task command router) for the real SDK to talk to. */
export async function startModalServer(options: ModalServerOptions = {}): Promise<LocalModalServer> {
  const defs = modalDefinitions();
  const state = new ModalServerState(mkdtempSync(join(tmpdir(), 'lanes-modal-server-')));
  open.add(state);
  const faults = new ModalFaults();
  const router: RouterBehaviour = { ...DEFAULT_ROUTER_BEHAVIOUR, ...options.router };
  const cpBehaviour: ControlPlaneBehaviour = { ...DEFAULT_CONTROL_PLANE_BEHAVIOUR, ...options.controlPlane };
  const sandboxOf = (request: unknown): string | undefined => {
    const r = request as { sandboxId?: string; taskId?: string } | undefined;
    return r?.sandboxId || (r?.taskId ? state.sandboxByTask(r.taskId)?.id : undefined);
  };

  let routerUrl = '';
  // A throttled answer's trailer: google.rpc.Status whose one detail is a modal.client.RPCRetryPolicy.
  const retryPolicyTrailer = (code: Status, retryAfterSecs: number): Uint8Array =>
    defs.RPCStatus.encode({
      code,
      message: 'throttled',
      details: [{ typeUrl: 'type.googleapis.com/modal.client.RPCRetryPolicy', value: defs.RPCRetryPolicy.encode({ retryAfterSecs }).finish() }],
    }).finish();
  const cp: Server = createServer().use(faultMiddleware(faults, 'ModalClient', sandboxOf, retryPolicyTrailer));
  cp.add(
    defs.ModalClientDefinition as never,
    complete(
      defs.ModalClientDefinition,
      controlPlane(state, () => routerUrl, cpBehaviour),
    ) as never,
  );
  const tcr: Server = createServer()
    .use(faultMiddleware(faults, 'TaskCommandRouter', sandboxOf, retryPolicyTrailer))
    .use(routerAuthMiddleware());
  tcr.add(defs.TaskCommandRouterDefinition as never, complete(defs.TaskCommandRouterDefinition, commandRouter(state, router)) as never);
  const cpPort = await cp.listen('127.0.0.1:0');
  const tcrPort = await tcr.listen('127.0.0.1:0');
  const proxy = new RouterProxy(tcrPort);
  routerUrl = `https://127.0.0.1:${await proxy.listen()}`;
  const url = `http://127.0.0.1:${cpPort}`;

  const info = (id: string): LocalSandboxInfo | undefined => {
    const s = state.sandboxes.get(id);
    if (!s) return undefined;
    const r = s.result;
    const exitCode = !r ? null : r.status === GENERIC_STATUS.TERMINATED ? 137 : r.status === GENERIC_STATUS.TIMEOUT ? 124 : r.exitcode;
    return {
      id: s.id,
      appId: s.appId,
      imageId: s.imageId,
      running: s.running,
      exitCode,
      tags: { ...s.tags },
      env: { ...s.env },
      volumes: { ...s.volumes },
      lifetimeMs: s.lifetimeMs,
      dir: s.dir,
      execs: [...s.execs.values()].map((e) => ({
        argv: [...e.argv],
        timeoutMs: e.timeoutMs,
        cwd: e.cwd,
        startedAt: e.startedAt,
        endedAt: e.endedAt,
        stdoutBytes: e.outputBytes[0],
      })),
    };
  };

  let closed = false;
  return {
    url,
    routerUrl,
    rootDir: state.rootDir,
    faults,
    router,
    controlPlane: cpBehaviour,
    client(params = {}) {
      // The SDK reads its server URL from the environment when the client is built, and only then.
      const previous = process.env['MODAL_SERVER_URL'];
      process.env['MODAL_SERVER_URL'] = url;
      try {
        return new ModalClient({ tokenId: 'ak-local', tokenSecret: 'as-local', logLevel: 'error', ...params });
      } finally {
        if (previous === undefined) delete process.env['MODAL_SERVER_URL'];
        else process.env['MODAL_SERVER_URL'] = previous;
      }
    },
    defineSecret: (name, env) => state.defineSecret(name, env),
    failImageBuilds: (tag, exception = `build of ${tag} failed`) => void state.failingBuilds.set(tag, exception),
    sandbox: info,
    runningSandboxIds: () => [...state.sandboxes.values()].filter((s) => s.running).map((s) => s.id),
    killSandbox(id, exitCode = 137) {
      state.sandboxes.get(id)?.finish({ status: exitCode === 0 ? GENERIC_STATUS.SUCCESS : GENERIC_STATUS.FAILURE, exitcode: exitCode, exception: 'killed from outside' });
    },
    terminateSandbox(id) {
      state.sandboxes.get(id)?.finish({ status: GENERIC_STATUS.TERMINATED, exitcode: 0, exception: 'terminated' });
    },
    dropRouterConnections: () => proxy.dropAll(),
    async close() {
      if (closed) return;
      closed = true;
      for (const s of state.sandboxes.values()) s.finish({ status: GENERIC_STATUS.TERMINATED, exitcode: 0, exception: 'server shut down' });
      await Promise.all([...state.sandboxes.values()].map((s) => s.reaped));
      await proxy.close();
      cp.forceShutdown();
      tcr.forceShutdown();
      open.delete(state);
      rmSync(state.rootDir, { recursive: true, force: true });
    },
  };
}
