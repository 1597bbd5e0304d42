import { readFileSync } from 'node:fs';
import { createRequire, Module } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The gRPC service definitions the local Modal server serves, taken from the pinned SDK itself.
 *
 * `modal@0.11.1` bundles its generated protobuf code (ts-proto, nice-grpc style: method tables with
 * message encode/decode) in `dist/index.cjs` but does not export `ModalClientDefinition` or
 * `TaskCommandRouterDefinition`. We evaluate that same bundle in memory with one export line
 * appended, so the server speaks exactly the wire format of the SDK the provider runs on, and no
 * SDK or proto code is copied into this repository.
 *
 * This is tied to the SDK version: a different version may rename or drop these bindings, or change
 * the messages. Loading refuses any other version loudly rather than serving a mismatched protocol.
 */
export const PINNED_MODAL_SDK_VERSION = '0.11.1';

/** A nice-grpc service definition as the bundle declares it (kept loose: we only serve it). */
export type ServiceDefinition = Record<string, unknown> & { name: string; fullName: string; methods: Record<string, unknown> };

/** A ts-proto message codec as the bundle declares it (only encoding is used). */
export interface MessageCodec {
  encode(message: object): { finish(): Uint8Array };
}

export interface ModalDefinitions {
  readonly ModalClientDefinition: ServiceDefinition;
  readonly TaskCommandRouterDefinition: ServiceDefinition;
  /**
   * `google.rpc.Status` and `modal.client.RPCRetryPolicy`: a throttled answer's
   * `grpc-status-details-bin` trailer, which the SDK's retryMiddleware reads (getServerRetryPolicy).
   */
  readonly RPCStatus: MessageCodec;
  readonly RPCRetryPolicy: MessageCodec;
}

let loaded: ModalDefinitions | undefined;

/** Loads (once per process) the definitions from the installed SDK; throws unless it is exactly the pinned version. */
export function modalDefinitions(): ModalDefinitions {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  // The package's entry (dist/index.js or dist/index.cjs, depending on the resolver's conditions);
  // package.json is not exported, so it is found beside dist/.
  const dist = dirname(require.resolve('modal'));
  const filename = join(dist, 'index.cjs');
  const packageJson = join(dist, '..', 'package.json');
  const version = (JSON.parse(readFileSync(packageJson, 'utf8')) as { version?: string }).version;
  if (version !== PINNED_MODAL_SDK_VERSION) {
    throw new Error(
      `the local Modal server serves the protocol of modal@${PINNED_MODAL_SDK_VERSION}, but modal@${version ?? '?'} is installed: ` +
        're-check the service definitions and the RPC semantics against the new SDK before changing PINNED_MODAL_SDK_VERSION',
    );
  }
  const source = readFileSync(filename, 'utf8');
  const m = new Module(filename) as Module & { _compile(src: string, file: string): void; paths: string[] };
  m.filename = filename;
  m.paths = (Module as unknown as { _nodeModulePaths(dir: string): string[] })._nodeModulePaths(dirname(filename));
  m._compile(`${source}\nmodule.exports.__lanes = { ModalClientDefinition, TaskCommandRouterDefinition, RPCStatus, RPCRetryPolicy };`, filename);
  const defs = (m.exports as { __lanes?: Partial<ModalDefinitions> }).__lanes;
  if (!defs?.ModalClientDefinition || !defs.TaskCommandRouterDefinition || !defs.RPCStatus || !defs.RPCRetryPolicy) {
    throw new Error(`modal@${version} no longer defines ModalClientDefinition/TaskCommandRouterDefinition/RPCStatus/RPCRetryPolicy in dist/index.cjs`);
  }
  loaded = {
    ModalClientDefinition: defs.ModalClientDefinition,
    TaskCommandRouterDefinition: defs.TaskCommandRouterDefinition,
    RPCStatus: defs.RPCStatus,
    RPCRetryPolicy: defs.RPCRetryPolicy,
  };
  return loaded;
}
