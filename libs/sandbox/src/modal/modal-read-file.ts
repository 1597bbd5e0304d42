import { AgentFileError, ProviderInvalidError, formatBytes } from '@lanes/contracts';
import type { ExecResult } from '../provider.js';
import { MODAL_PROVIDER_NAME } from './modal-errors.js';

/**
 * Room for READ_FILE_SCRIPT's verdict line beyond the path it names: "size " and 20 digits, or
 * "type a character device", plus the newline.
 */
const VERDICT_LINE_CHARS = 64;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** stderr kept from a read: enough for the shell's complaint or "lanes: base64 is missing…". */
export const READ_FILE_STDERR_CHARS = 4_096;

/**
 * The most READ_FILE_SCRIPT can answer for a file at `relative` under a cap of maxBytes: its verdict
 * line and maxBytes + 1 bytes in base64. The read collects this much and no more, so the worker
 * holds about 4/3 × maxBytes whatever the sandbox sends; anything longer is past the cap.
 */
export function readFileOutputChars(relative: string, maxBytes: number): number {
  return VERDICT_LINE_CHARS + relative.length + 4 * Math.ceil((maxBytes + 1) / 3);
}

/**
 * What READ_FILE_SCRIPT answered, for the file `name`: its bytes, undefined when it is missing, or
 * the rule it broke (AgentFileError). `maxChars` is readFileOutputChars for this read; the collector
 * kept at most one character more, so a longer answer shows that the sandbox ignored the cap.
 */
export function parseFileRead(name: string, read: ExecResult, maxBytes: number, maxChars: number): Uint8Array | undefined {
  if (read.timedOut) throw new AgentFileError(name, 'not-regular', 'could not be read within the file deadline');
  if (read.exitCode !== 0) throw new ProviderInvalidError(MODAL_PROVIDER_NAME, `reading ${name} exited ${read.exitCode}: ${read.stderr.slice(-200)}`);
  if (read.stdout.length > maxChars)
    throw new AgentFileError(
      name,
      'too-large',
      `was read back longer than ${formatBytes(maxBytes)} can be (limit ${formatBytes(maxBytes)}): a tool in the sandbox ignored the cap`,
    );
  const end = read.stdout.indexOf('\n');
  const line = end < 0 ? read.stdout : read.stdout.slice(0, end);
  const [word = '', ...rest] = line.split(' ');
  const detail = rest.join(' ');
  switch (word) {
    case 'missing':
      return undefined;
    case 'link':
      throw new AgentFileError(name, 'link', `${detail === name ? 'is a symbolic link' : `is under ${detail}, which is a symbolic link`}; lanes reads no file through a link`);
    case 'changed':
      throw new AgentFileError(name, 'link', 'was replaced while lanes opened it; lanes reads no file through a link');
    case 'type':
      throw new AgentFileError(name, 'not-regular', `is ${detail}, not a regular file`);
    case 'unreadable':
      throw new AgentFileError(name, 'not-regular', 'cannot be opened for reading');
    case 'size':
      if (end >= 0 && /^\d+$/.test(detail)) return contents(name, Number(detail), read.stdout.slice(end + 1), maxBytes);
  }
  throw new ProviderInvalidError(MODAL_PROVIDER_NAME, `reading ${name} answered ${JSON.stringify(read.stdout.slice(0, 80))}`);
}

/** The file's size as measured, then its first maxBytes + 1 bytes (none once the size is over). */
function contents(name: string, size: number, body: string, maxBytes: number): Uint8Array {
  if (size > maxBytes) throw tooLarge(name, 'is', size, maxBytes);
  if (body.length % 4 !== 0 || !BASE64.test(body)) throw new ProviderInvalidError(MODAL_PROVIDER_NAME, `reading ${name} answered ${body.length} characters that are not base64`);
  // A copy: small decodes share Node's pooled buffer, which must not reach a caller.
  const bytes = new Uint8Array(Buffer.from(body, 'base64'));
  if (bytes.byteLength > maxBytes) throw tooLarge(name, 'grew past', bytes.byteLength, maxBytes);
  return bytes;
}

function tooLarge(name: string, verb: string, size: number, maxBytes: number): AgentFileError {
  return new AgentFileError(name, 'too-large', `${verb} ${formatBytes(size)} (limit ${formatBytes(maxBytes)})`);
}
