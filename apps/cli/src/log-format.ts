/** How the process writes its logs: pino JSON, or pino-pretty's readable lines. */
export type LogFormat = 'json' | 'pretty';

export type LogFormatDecision = { format: LogFormat; reason: string };

/**
 * Readable by default where a person reads, JSON where a machine does: LANES_LOG_FORMAT wins when
 * set; otherwise a terminal on stdout gets pretty lines and anything else (a pipe, a file, a log
 * collector) gets JSON.
 */
export function decideLogFormat(setting: LogFormat | undefined, stdoutIsTty: boolean): LogFormatDecision {
  if (setting) return { format: setting, reason: `LANES_LOG_FORMAT=${setting}` };
  return stdoutIsTty ? { format: 'pretty', reason: 'stdout is a terminal' } : { format: 'json', reason: 'stdout is not a terminal' };
}
