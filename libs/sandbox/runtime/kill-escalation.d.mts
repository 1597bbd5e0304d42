/** Types for kill-escalation.mjs (plain JS so the sandbox init runs on bare `node`). */
export declare const ESCALATION_TICK_MS: number;
export declare const KILL_SWEEP_LIMIT_MS: number;

export interface KillTreeOptions {
  /** The command's process group (its leader was spawned with setsid). */
  pgid: number;
  /** The command's leader; its descendants are members even after they leave the group. */
  leaderPid: number;
  /** "KEY=value" every member inherited, e.g. `LANES_EXEC_ID=<sandbox>:<n>`; finds re-parented escapees. */
  envMarker?: string;
  /** Wait between SIGINT, SIGTERM and SIGKILL. */
  graceMs: number;
  tickMs?: number;
  /** How long a process the marker scan cannot read is read again (default UNREADABLE_SETTLE_MS in proc.mjs). */
  unreadableSettleMs?: number;
  /** Pids never to signal; default: the calling process. */
  exclude?: ReadonlySet<number>;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export interface KillTreeOutcome {
  /** The last signal that had to be sent; 'none' when nothing was alive to begin with. */
  lastSignal: 'none' | 'SIGINT' | 'SIGTERM' | 'SIGKILL';
  /** Members still running after the SIGKILL sweep limit (should be empty; D-state processes only). */
  survivors: number[];
}

export declare function killTree(options: KillTreeOptions): Promise<KillTreeOutcome>;
