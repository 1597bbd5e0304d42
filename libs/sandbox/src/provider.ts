import type { PollResult, SandboxSpec, SandboxTags } from '@lanes/contracts';

export type OutputStream = 'stdout' | 'stderr';

export interface ExecOptions {
  /** Working directory inside the sandbox; defaults to the sandbox workdir. */
  cwd?: string;
  /** Extra environment for this command only. Card text travels here or in files, never in argv-as-shell. */
  env?: Record<string, string>;
  /** Deadline for this command. On expiry its process group is killed (SIGINT → SIGTERM → SIGKILL), never the sandbox. */
  timeoutMs?: number;
  /** Cancels the command (or removes it from the queue if it has not started). Same escalation as a timeout. */
  signal?: AbortSignal;
  /** Grace between SIGINT, SIGTERM and SIGKILL; default DEFAULT_KILL_GRACE_MS. */
  killGraceMs?: number;
  /** Live output, e.g. for the BullMQ job log. */
  onOutput?: (stream: OutputStream, chunk: string) => void;
  /**
   * A card's last command: once it has exited, every other process still in the sandbox (a server
   * it left in the background, a daemon that left its group) is killed before the result comes back,
   * so the next card starts in a sandbox with nothing of this one running. Local sandboxes; a Modal
   * sandbox keeps them (README "Threat model").
   */
  endLeftovers?: boolean;
}

export interface ReadFileOptions {
  /** Default agentLimits.DEFAULT_MAX_RESULT_BYTES. */
  maxBytes?: number;
}

/** What a reset that runs as a command (a remote sandbox) is bounded by. */
export type ResetDirsOptions = Pick<ExecOptions, 'timeoutMs' | 'killGraceMs' | 'signal'> & {
  /** Removed with everything in them and not made again (an earlier card's directory), in the same call; best effort. */
  remove?: readonly string[];
};

export interface ExecResult {
  /** The command's exit code; 128+signal when it was ended by a signal. */
  exitCode: number;
  stdout: string;
  stderr: string;
  /** The command hit `timeoutMs` and its group was killed. */
  timedOut: boolean;
  /** The command was cancelled through `signal` and its group was killed. */
  cancelled: boolean;
  durationMs: number;
}

/** One sandbox. A slot owns exactly one for its lifetime; a respawn replaces it with a new handle and id. */
export interface SandboxHandle {
  readonly id: string;
  readonly provider: string;
  /** Host pid of the sandbox root (local provider only). Killing it kills the sandbox. */
  readonly pid?: number;
  /** A directory inside the sandbox that belongs to lanes (cards, outputs). */
  readonly workdir: string;
  /**
   * Set when create() itself ran a nonce canary in this sandbox and the nonce came back (the Modal
   * provider's connect canary; a local sandbox's start canary, local/start-canary.ts). A new sandbox
   * passes a canary before it is live; this one already has, so a slot runs a second only when
   * something changed the sandbox since (a file sync).
   */
  readonly passedCanaryAtCreate?: boolean;
  /**
   * Set when a writeFile outside the directories a resetDirs names may run while that reset runs
   * (on Modal each is a command of its own, and neither touches the other's paths). A local reset
   * may move an earlier card's tree into place, so a write beside it waits.
   */
  readonly writeBesideReset?: boolean;
  /**
   * Runs argv (no shell) in its own process group. Commands in one sandbox run one at a time.
   * Throws SandboxGoneError when the sandbox is dead, ProviderUnavailableError on transport failure.
   */
  exec(argv: readonly string[], options?: ExecOptions): Promise<ExecResult>;
  /** live / exited(code) / missing. Throws ProviderUnavailableError when the provider could not be asked. */
  poll(): Promise<PollResult>;
  /** Writes a file inside the sandbox, creating parent directories. */
  writeFile(path: string, data: string | Uint8Array): Promise<void>;
  /**
   * Reads a file an agent left inside the sandbox, as untrusted input: never through a link (the
   * file or any directory below the workdir), only a regular file, without blocking, at most
   * `maxBytes`, within the provider's file deadline. Undefined when it does not exist. A file that
   * breaks a rule throws AgentFileError naming the file and the rule (the sandbox is fine).
   */
  readFile(path: string, options?: ReadFileOptions): Promise<Uint8Array | undefined>;
  /**
   * Empties directories for a fresh attempt: each path is removed with everything in it, then made
   * again, empty; `options.remove` paths are removed only. Every path must lie strictly inside
   * `workdir` (else ProviderInvalidError, nothing touched). Answers like a command (`rm -rf … && mkdir -p …`): exit 0, or non-zero with the reason
   * in stderr. Throws as exec does (SandboxGoneError, ProviderUnavailableError). A provider that can
   * reach the sandbox's files directly does it without starting a process.
   */
  resetDirs(paths: readonly string[], options?: ResetDirsOptions): Promise<ExecResult>;
  /** Ends the sandbox and everything in it. Already gone is not an error. */
  terminate(): Promise<void>;
}

export interface CreateOptions {
  /** The sandbox must answer its first command within this, or create fails with ConnectTimeoutError. */
  connectTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface SandboxRef {
  id: string;
  tags: Partial<SandboxTags>;
  /** Host pid, for the local provider. */
  pid?: number;
  /**
   * Local provider only: whether the process that created it still runs on this host. A worker cut
   * off from Redis is silent but alive, and its sandboxes are not orphans. Absent: not knowable.
   */
  ownerAlive?: boolean;
}

export interface SandboxProvider {
  readonly name: string;
  /** Creates a fresh sandbox from the base image (never a snapshot), tagged with lane, slot and worker. */
  create(spec: SandboxSpec, options?: CreateOptions): Promise<SandboxHandle>;
  /** Sandboxes this provider can see whose tags match every given tag. */
  list(tags?: Partial<SandboxTags>): Promise<SandboxRef[]>;
  /** Terminates by id; "already gone" is success. */
  terminateById(id: string): Promise<void>;
  /** Releases provider-level resources (clients, timers). Does not terminate sandboxes. */
  close(): Promise<void>;
}
