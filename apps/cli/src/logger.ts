import pino, { type Logger, type LoggerOptions } from 'pino';
import { parseEnv } from '@lanes/contracts';
import { decideLogFormat } from './log-format.js';

/** Paths pino blanks out wherever they appear in a log line: tokens, secrets, auth headers. */
export const REDACT_PATHS = [
  'token',
  'tokens',
  '*.token',
  '*.tokens',
  'secret',
  '*.secret',
  'password',
  '*.password',
  'authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'env.MODAL_TOKEN_ID',
  'env.MODAL_TOKEN_SECRET',
  'env.LANES_API_TOKENS',
  'env.LANES_CALLBACK_SECRET',
  'env.LANES_CALLBACK_SECRET_PREVIOUS',
  '*.env.MODAL_TOKEN_SECRET',
  'redisUrl',
];

/** pino-pretty's options: one line per entry, times as wall-clock, without the fields every line shares. */
const PRETTY_OPTIONS = { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,app', singleLine: true };

/**
 * pino, created once per process; children carry lane, slot, sandbox and card ids. JSON, or pino's
 * own pretty transport in a terminal (see decideLogFormat). Redaction runs before either, so a
 * pretty line hides secrets as the JSON does. A destination passed in (tests) always gets JSON.
 */
export function createLogger(env: NodeJS.ProcessEnv = process.env, destination?: pino.DestinationStream, stdoutIsTty = process.stdout.isTTY === true): Logger {
  const options: LoggerOptions = { level: env.LANES_LOG_LEVEL ?? 'info', base: { app: 'lanes' }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
  if (destination) return pino(options, destination);
  // Validated like every setting: a wrong value stops the process naming LANES_LOG_FORMAT.
  const { format } = decideLogFormat(parseEnv({ LANES_LOG_FORMAT: env.LANES_LOG_FORMAT }).LANES_LOG_FORMAT, stdoutIsTty);
  // Colour only on a terminal, and never against NO_COLOR (https://no-color.org).
  const colorize = stdoutIsTty && !env.NO_COLOR;
  return format === 'pretty' ? pino({ ...options, transport: { target: 'pino-pretty', options: { ...PRETTY_OPTIONS, colorize } } }) : pino(options);
}
