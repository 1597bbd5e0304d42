import pino, { type Logger } from 'pino';

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
  '*.env.MODAL_TOKEN_SECRET',
  'redisUrl',
];

/** pino JSON, created once per process; children carry lane, slot, sandbox and card ids. */
export function createLogger(env: NodeJS.ProcessEnv = process.env, destination?: pino.DestinationStream): Logger {
  return pino({ level: env.LANES_LOG_LEVEL ?? 'info', base: { app: 'lanes' }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, destination);
}
