import { ServerError, Status, type CallContext } from 'nice-grpc';
import { GENERIC_STATUS, type ServerSandbox } from './sandbox.js';
import type { ModalServerState } from './state.js';

// Requests are the SDK's generated message objects, whose types the bundle does not export.
type Req = any;
export type Handlers = Record<string, (request: Req, context: CallContext) => unknown>;

/** An unsigned JWT that expires `lifetimeSecs` from now: the SDK parses `exp` from both tokens it is given. */
export function unsignedJwt(subject: string, lifetimeSecs: number): string {
  const part = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part({ sub: subject, exp: Math.floor(Date.now() / 1000) + lifetimeSecs })}.`;
}

/** The `exp` (seconds since the epoch) of a token `unsignedJwt` made; undefined when it is not one. */
export function jwtExpiry(token: string): number | undefined {
  try {
    const exp = (JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' ? exp : undefined;
  } catch {
    return undefined;
  }
}

/** An unsigned JWT whose `exp` is far away. */
export function farFutureJwt(subject: string): string {
  return unsignedJwt(subject, FAR_FUTURE_SECS);
}

function tagMap(tags: Array<{ tagName: string; tagValue: string }> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of tags ?? []) out[t.tagName] = t.tagValue;
  return out;
}

function tagList(tags: Record<string, string>): Array<{ tagName: string; tagValue: string }> {
  return Object.entries(tags).map(([tagName, tagValue]) => ({ tagName, tagValue }));
}

function notFound(what: string): ServerError {
  return new ServerError(Status.NOT_FOUND, `${what} not found`);
}

/** The sandbox named by a request, or NOT_FOUND as Modal answers for an id it never had. */
function sandboxOf(state: ModalServerState, sandboxId: string): ServerSandbox {
  const sandbox = state.sandboxes.get(sandboxId);
  if (!sandbox) throw notFound(`Sandbox ${sandboxId}`);
  return sandbox;
}

/** Waits (bounded by `timeoutSecs`, 0 = answer now) and reports the result as SandboxWait does. */
async function waitResult(sandbox: ServerSandbox, timeoutSecs: number, signal: AbortSignal): Promise<object> {
  await sandbox.waitFinished(timeoutSecs * 1000, signal);
  return { result: sandbox.result ? { ...sandbox.result } : undefined };
}

/**
 * How the control plane behaves where Modal's own behaviour is not settled (docs/modal.md).
 */
export interface ControlPlaneBehaviour {
  /**
   * Whether `SandboxListV2` fills each `SandboxInfo.tags`. Default true. The tag filter of the
   * request applies either way. Modal's proto marks the field "TODO: Not yet exposed in client
   * library" (modal-client `modal_proto/api.proto`, SandboxInfo), so a listing may well come back
   * without tags; false serves that form.
   */
  listTags: boolean;
  /**
   * Lifetime of the command-router tokens (JWTs) it hands out (SandboxCreateV2,
   * SandboxGetCommandRouterAccess), in whole seconds (JWT `exp`). Default ten years, so none expires
   * during a test; a few seconds makes the SDK refresh them (the router answers an expired one
   * UNAUTHENTICATED, and the SDK fetches a new one and retries).
   */
  routerTokenLifetimeSecs: number;
}

/** Ten years: a token that outlives any test. */
const FAR_FUTURE_SECS = 10 * 365 * 86_400;

export const DEFAULT_CONTROL_PLANE_BEHAVIOUR: Readonly<ControlPlaneBehaviour> = { listTags: true, routerTokenLifetimeSecs: FAR_FUTURE_SECS };

/**
 * The control plane (`modal.client.ModalClient`): only the RPCs the provider's SDK calls reach
 * (V2 sandboxes, which `modal@0.11.1` uses by default). `routerUrl` is where the command router
 * listens; it must be https (the SDK refuses anything else) and is reached insecurely because the
 * server URL is localhost.
 */
export function controlPlane(state: ModalServerState, routerUrl: () => string, behaviour: ControlPlaneBehaviour = { ...DEFAULT_CONTROL_PLANE_BEHAVIOUR }): Handlers {
  const routerJwt = (taskId: string): string => unsignedJwt(taskId, behaviour.routerTokenLifetimeSecs);
  return {
    authTokenGet: async () => ({ token: farFutureJwt('lanes-local-modal') }),

    environmentGetOrCreate: async (req) => ({
      environmentId: 'en-local',
      metadata: { name: req.deploymentName || 'main', settings: { imageBuilderVersion: '2024.10', webhookSuffix: '' } },
    }),

    appGetOrCreate: async (req) => {
      const create = req.objectCreationType === 1;
      const appId = state.appFor(req.environmentName ?? '', req.appName, create);
      if (appId === undefined) throw notFound(`App '${req.appName}'`);
      return { appId };
    },

    imageGetOrCreate: async (req) => {
      const commands: string[] = req.image?.dockerfileCommands ?? [];
      const imageId = state.imageFor(commands);
      const tag = commands[0]?.startsWith('FROM ') ? commands[0].slice(5) : '';
      const failure = state.failingBuilds.get(tag);
      const result = failure === undefined ? { status: GENERIC_STATUS.SUCCESS } : { status: GENERIC_STATUS.FAILURE, exception: failure };
      return { imageId, result };
    },

    imageFromId: async (req) => {
      if (!state.images.has(req.imageId)) throw notFound(`Image ${req.imageId}`);
      return { imageId: req.imageId };
    },

    secretGetOrCreate: async (req) => {
      const secret = state.secrets.get(req.deploymentName);
      if (!secret) throw notFound(`Secret '${req.deploymentName}'`);
      return { secretId: secret.id };
    },

    volumeGetOrCreate: async (req) => {
      const volumeId = state.volumeFor(req.deploymentName, req.objectCreationType === 1);
      if (volumeId === undefined) throw notFound(`Volume '${req.deploymentName}'`);
      return { volumeId };
    },

    sandboxCreateV2: async (req) => {
      const def = req.definition ?? {};
      if (!state.images.has(def.imageId)) throw new ServerError(Status.INVALID_ARGUMENT, `unknown image ${def.imageId}`);
      const env: Record<string, string> = {};
      for (const source of req.secretSources ?? []) {
        if (source.secretId) {
          const secret = state.secretById(source.secretId);
          if (!secret) throw notFound(`Secret ${source.secretId}`);
          Object.assign(env, secret.env);
        }
        Object.assign(env, source.env?.contents ?? {});
      }
      for (const id of def.secretIds ?? []) Object.assign(env, state.secretById(id)?.env ?? {});
      const volumes: Record<string, string> = {};
      for (const mount of def.volumeMounts ?? []) volumes[mount.mountPath] = mount.volumeId;
      const sandbox = state.createSandbox({
        appId: req.appId,
        imageId: def.imageId,
        timeoutSecs: def.timeoutSecs ?? 0,
        workdir: def.workdir,
        env,
        tags: tagMap(req.tags),
        volumes,
      });
      return {
        sandboxId: sandbox.id,
        taskId: sandbox.taskId,
        commandRouterAccess: { jwt: routerJwt(sandbox.taskId), url: routerUrl() },
      };
    },

    sandboxGetTaskIdV2: async (req) => {
      const sandbox = sandboxOf(state, req.sandboxId);
      return sandbox.result ? { taskResult: { ...sandbox.result } } : { taskId: sandbox.taskId };
    },

    sandboxGetCommandRouterAccess: async (req) => {
      const sandbox = sandboxOf(state, req.sandboxId);
      return { jwt: routerJwt(sandbox.taskId), url: routerUrl() };
    },

    sandboxWaitV2: async (req, context) => waitResult(sandboxOf(state, req.sandboxId), req.timeout ?? 0, context.signal),

    sandboxTerminateV2: async (req) => {
      const sandbox = sandboxOf(state, req.sandboxId);
      const existingResult = sandbox.result ? { ...sandbox.result } : undefined;
      sandbox.finish({ status: GENERIC_STATUS.TERMINATED, exitcode: 0, exception: 'terminated' });
      return { existingResult };
    },

    sandboxListV2: async (req) => {
      const want = tagMap(req.tags);
      const before = req.beforeTimestamp || Number.POSITIVE_INFINITY;
      const sandboxes = [...state.sandboxes.values()]
        .filter((s) => (req.includeFinished || s.running) && s.createdAt < before)
        .filter((s) => !req.appId || s.appId === req.appId)
        .filter((s) => Object.entries(want).every(([k, v]) => s.tags[k] === v))
        .sort((a, b) => b.createdAt - a.createdAt)
        .map((s) => ({ id: s.id, appId: s.appId, createdAt: s.createdAt, tags: behaviour.listTags ? tagList(s.tags) : [], imageId: s.imageId }));
      return { sandboxes };
    },

    sandboxTagsGetV2: async (req) => ({ tags: tagList(sandboxOf(state, req.sandboxId).tags) }),

    sandboxTagsSetV2: async (req) => {
      sandboxOf(state, req.sandboxId).tags = tagMap(req.tags);
      return {};
    },
  };
}
