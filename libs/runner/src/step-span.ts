import { inSpan, traceparentOf } from '@lanes/tracing';
import type { SandboxHandle } from '@lanes/sandbox';
import type { CheckedCommand } from './command-check.js';
import type { Step } from './run-outcome.js';

/**
 * One command of the card in its sandbox, as a `sandbox.exec` span (a child of the run's), with
 * what the supervision rules read of it. `run` gets the span's `traceparent`, for the command's
 * TRACEPARENT: the agent's own spans then join the card's trace under this span. With tracing off
 * there is no span and no traceparent. No argv or output goes in the span: a lane's commands may
 * hold tokens.
 */
export function inStepSpan(handle: SandboxHandle, step: Step, run: (traceparent: string | undefined) => Promise<CheckedCommand>): Promise<CheckedCommand> {
  return inSpan('sandbox.exec', { attributes: { 'lanes.step': step, 'lanes.sandbox.id': handle.id } }, async (span) => {
    const checked = await run(traceparentOf(span));
    if (span) {
      const o = checked.outcome;
      span.setAttributes({
        'lanes.verdict': checked.verdict,
        ...(o.kind === 'exited' ? { 'process.exit.code': o.exitCode, 'lanes.timed_out': o.timedOut, 'lanes.cancelled': o.cancelled } : { 'lanes.exec_threw': true }),
      });
    }
    return checked;
  });
}
