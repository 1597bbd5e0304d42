// @lanes/sandbox: what the stack needs of a sandbox provider (the contract, the local provider,
// isolation, the registry). Modal's provider is `@lanes/sandbox/modal`; test doubles are
// `@lanes/sandbox/testing` (and `@lanes/sandbox/testing/modal-server`).
export type { OutputStream, ExecOptions, ExecResult, ReadFileOptions, ResetDirsOptions, SandboxHandle, CreateOptions, SandboxRef, SandboxProvider } from './provider.js';
export { LocalSandboxProvider, createLocalProvider, type LocalProviderOptions } from './local/local-provider.js';
export { detectIsolation, type IsolationMode } from './local/isolation.js';
export { probeSeparateUid } from './local/separate-uid.js';
export { createProviderRegistry, type ProviderRegistry, type ProviderRegistryOptions } from './provider-registry.js';
export { bestEffort, type CleanupErrorSink } from './best-effort.js';
export { syncFiles } from './file-sync.js';
export { isAlive } from './proc.js';
export { sandboxMembers } from './sandbox-reaper.js';
