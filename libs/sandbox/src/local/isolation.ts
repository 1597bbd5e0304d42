import { spawnSync } from 'node:child_process';
import { agentLimits } from '@lanes/contracts';
import { nprocArgs, setprivArgs } from './separate-uid.js';
import { START_CANARY_ENV, START_CANARY_FAILED_LINE } from './start-canary.js';

/**
 * How a local sandbox is fenced:
 * - `separate-uid`: a PID namespace as below, entered as an unprivileged uid of the sandbox's own
 *   (separate-uid.ts). The only mode for untrusted agents.
 * - `pid-namespace`: `unshare --pid --fork --kill-child --mount-proc`. The sandbox has its own pid 1;
 *   when the root dies the kernel kills everything inside, exactly like a container.
 * - `process-group`: a detached process group (no namespace support, e.g. unprivileged). Commands
 *   run in their own groups, so the host must sweep them when the root dies.
 * In both, the init watches a lifeline (LIFELINE_FD) and ends the sandbox when the host that
 * created it dies: it sweeps its members itself, then exits (which, in a namespace, ends the rest).
 */
export type IsolationMode = 'separate-uid' | 'pid-namespace' | 'process-group';

/** Whether a mode keeps an agent away from the worker and the other slots (README "Threat model"). */
export function isolatesAgents(mode: IsolationMode): boolean {
  return mode === 'separate-uid';
}

/** Probing `unshare` takes a few ms; a hung probe must not hang provider construction. */
const UNSHARE_PROBE_TIMEOUT_MS = 5_000;

const UNSHARE_ARGS = ['--pid', '--fork', '--kill-child', '--mount-proc'] as const;

/** The fd the sandbox root inherits the lifeline on (the first after stdio). */
export const LIFELINE_FD = 3;

let detected: 'pid-namespace' | 'process-group' | undefined;

/** Whether this machine lets us create a PID namespace; probed once per process. */
export function detectIsolation(): 'pid-namespace' | 'process-group' {
  if (detected === undefined) {
    const probe = spawnSync('unshare', [...UNSHARE_ARGS, '--', 'true'], {
      stdio: 'ignore',
      timeout: UNSHARE_PROBE_TIMEOUT_MS,
    });
    detected = probe.status === 0 ? 'pid-namespace' : 'process-group';
  }
  return detected;
}

export interface RootCommand {
  command: string;
  args: string[];
}

/**
 * The argv that starts a sandbox root running `init` (an argv, normally `[node, local-init.mjs]`).
 *
 * In a namespace, pid 1 is a `/bin/sh` that starts the init and `wait`s: node cannot reap children
 * it did not spawn, while sh's wait reaps every orphan re-parented to pid 1, so zombies do not pile
 * up over a long-lived sandbox. sh exits with the init's status, so the init dying ends the sandbox.
 */
export function rootCommand(mode: IsolationMode, init: readonly string[], agentUid?: number, maxProcesses: number = agentLimits.SANDBOX_MAX_PROCESSES): RootCommand {
  if (mode === 'process-group') {
    const [command, ...args] = init;
    if (command === undefined) throw new RangeError('init command must not be empty');
    return { command, args };
  }
  // A background job's stdin is /dev/null in a non-interactive sh, so the control channel (stdin)
  // is handed over through fd 9 explicitly (fd 3 is the lifeline, passed through untouched).
  // While the init starts, this shell runs the start canary (start-canary.ts): it execs `echo` with
  // the host's line, whose output shares the init's channel, or says on it that it could not.
  const script = `c=$${START_CANARY_ENV}; unset ${START_CANARY_ENV}; exec 9<&0; "$@" <&9 9<&- & exec 9<&-; [ -z "$c" ] || (exec echo "$c" </dev/null) || echo '${START_CANARY_FAILED_LINE}'; wait $!`;
  const shell = ['/bin/sh', '-c', script, 'lanes-sandbox', ...init];
  if (mode === 'pid-namespace') return { command: 'unshare', args: [...UNSHARE_ARGS, '--', ...shell] };
  // unshare mounts the namespace's /proc as root, prlimit caps the processes of the uid to come (a
  // limit the agent, no longer root, cannot raise), then setpriv drops to that uid for good.
  if (agentUid === undefined) throw new RangeError('separate-uid needs an agent uid');
  return { command: 'unshare', args: [...UNSHARE_ARGS, '--', ...nprocArgs(maxProcesses), 'setpriv', ...setprivArgs(agentUid), '--', ...shell] };
}
