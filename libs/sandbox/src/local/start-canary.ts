import type { InitChannel, StartCanaryEvent } from './init-channel.js';

/**
 * A new local sandbox's canary, run while its init starts instead of after. In a namespace the
 * sandbox's pid 1 is a shell (isolation.ts's rootCommand) that starts the init in the background,
 * then execs `echo` with a line the host chose, carrying a fresh nonce. `echo` runs as the agent
 * will (the sandbox's uid, namespace, working directory and PATH), and its output shares the init's
 * channel, so the host reads the nonce back on the channel the sandbox's commands answer on.
 *
 * A sandbox whose line came back by the init's first pong has passed a nonce canary at create
 * (`passedCanaryAtCreate`): the slot runs no second one, and the new sandbox's first card starts
 * one exec sooner. The exec was the sandbox's first fork, and it now overlaps the init's own
 * start, where it used to follow it. A shell that could not run `echo` says so
 * (START_CANARY_FAILED_LINE); that sandbox, and one whose line did not come back in time, have not
 * passed, and the slot runs its canary through the init as before. In a process group there is no
 * such shell, and no start canary.
 */
export const START_CANARY_ENV = 'LANES_SANDBOX_CANARY';
/** What the shell writes, with its builtin echo, when the exec of `echo` failed. */
export const START_CANARY_FAILED_LINE = '{"t":"canary-failed"}';

export interface StartCanary {
  nonce: string;
  /** The JSON line the shell echoes: the nonce, as a channel event. */
  line: string;
}

export function startCanary(nonce: string): StartCanary {
  return { nonce, line: JSON.stringify({ t: 'canary', nonce } satisfies StartCanaryEvent) };
}

/** Whether an event the channel heard at the start is this canary's nonce come back. */
export function startCanaryAnswered(canary: StartCanary, event: StartCanaryEvent): boolean {
  return event.t === 'canary' && event.nonce === canary.nonce;
}

/**
 * Resolves with whether the canary's line came back; false on the shell's failure line or when
 * `gone` (the root's exit) settles first. Registered before the channel can have read anything.
 */
export function awaitStartCanary(channel: InitChannel, canary: StartCanary, gone: Promise<unknown>): Promise<boolean> {
  const answered = new Promise<boolean>((resolve) => channel.onStartCanary((event) => resolve(startCanaryAnswered(canary, event))));
  return Promise.race([answered, gone.then(() => false)]);
}
