/**
 * A minimal POSIX (pax) tar writer: regular files, directories and symlinks. File sync ships one
 * archive per batch so that no path ever travels in argv (DESIGN.md failure 5), and every sandbox
 * image already has `tar`. Names longer than ustar's 100 bytes get a pax `path=` record, so deep
 * trees with 200+ character paths survive intact.
 */

const BLOCK_BYTES = 512;
/** ustar `size` is 11 octal digits: 8 GiB - 1. Larger files would need a pax `size` record. */
const MAX_ENTRY_BYTES = 8 ** 11 - 1;
const USTAR_NAME_BYTES = 100;

export type TarEntry =
  | { type: 'file'; path: string; mode: number; mtimeMs: number; data: Uint8Array }
  | { type: 'directory'; path: string; mode: number; mtimeMs: number }
  | { type: 'symlink'; path: string; mode: number; mtimeMs: number; target: string };

const TYPE_FLAG = { file: '0', directory: '5', symlink: '2', pax: 'x' } as const;

/** Bytes one entry adds to an archive, without building it (for batch planning). */
export function tarEntryBytes(path: string, dataBytes: number, linkTarget = ''): number {
  const paxBytes = paxRecords(path, linkTarget).length;
  const pax = paxBytes > 0 ? BLOCK_BYTES + padded(paxBytes) : 0;
  return pax + BLOCK_BYTES + padded(dataBytes);
}

/** The size of the two zero blocks that end every archive. */
export const TAR_TRAILER_BYTES = 2 * BLOCK_BYTES;

/** Archive paths are relative (no leading '/'): tar then extracts them under `-C <dir>`. */
export function buildTar(entries: readonly TarEntry[]): Uint8Array {
  const chunks: Uint8Array[] = [];
  for (const entry of entries) {
    const path = entry.type === 'directory' && !entry.path.endsWith('/') ? `${entry.path}/` : entry.path;
    const target = entry.type === 'symlink' ? entry.target : '';
    const data = entry.type === 'file' ? entry.data : new Uint8Array(0);
    if (data.byteLength > MAX_ENTRY_BYTES) throw new RangeError(`${entry.path}: larger than 8 GiB`);
    const pax = paxRecords(path, target);
    if (pax.length > 0) {
      chunks.push(header({ path: 'PaxHeader', mode: 0o644, size: pax.length, mtimeMs: entry.mtimeMs, type: TYPE_FLAG.pax, target: '' }));
      chunks.push(pad(pax));
    }
    chunks.push(header({ path, mode: entry.mode, size: data.byteLength, mtimeMs: entry.mtimeMs, type: TYPE_FLAG[entry.type], target }));
    if (data.byteLength > 0) chunks.push(pad(data));
  }
  chunks.push(new Uint8Array(TAR_TRAILER_BYTES));
  return concat(chunks);
}

function paxRecords(path: string, linkTarget: string): Uint8Array {
  let text = '';
  if (Buffer.byteLength(path) > USTAR_NAME_BYTES) text += paxRecord('path', path);
  if (Buffer.byteLength(linkTarget) > USTAR_NAME_BYTES) text += paxRecord('linkpath', linkTarget);
  return Buffer.from(text, 'utf8');
}

/** "<len> key=value\n", where len counts the whole record including its own digits. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const bodyBytes = Buffer.byteLength(body);
  let digits = 1;
  while (String(bodyBytes + digits).length > digits) digits += 1;
  return `${bodyBytes + digits}${body}`;
}

interface HeaderFields {
  path: string;
  mode: number;
  size: number;
  mtimeMs: number;
  type: string;
  target: string;
}

function header(fields: HeaderFields): Uint8Array {
  const block = Buffer.alloc(BLOCK_BYTES);
  // Over-long names are carried by the pax record; the ustar field keeps a truncated copy for old readers.
  block.write(truncateBytes(fields.path, USTAR_NAME_BYTES), 0, 'utf8');
  writeOctal(block, 100, 8, fields.mode & 0o7777);
  writeOctal(block, 108, 8, 0);
  writeOctal(block, 116, 8, 0);
  writeOctal(block, 124, 12, fields.size);
  writeOctal(block, 136, 12, Math.floor(fields.mtimeMs / 1000));
  block.write('        ', 148, 'latin1'); // checksum is computed over spaces in its own field
  block.write(fields.type, 156, 'latin1');
  block.write(truncateBytes(fields.target, USTAR_NAME_BYTES), 157, 'utf8');
  block.write('ustar\u000000', 257, 'latin1');
  let sum = 0;
  for (const byte of block) sum += byte;
  writeOctal(block, 148, 7, sum);
  return block;
}

function writeOctal(block: Buffer, offset: number, width: number, value: number): void {
  block.write(`${value.toString(8).padStart(width - 1, '0')}\0`, offset, 'latin1');
}

function truncateBytes(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.byteLength <= maxBytes
    ? text
    : bytes
        .subarray(0, maxBytes)
        .toString('utf8')
        .replace(/\uFFFD+$/u, '');
}

function padded(bytes: number): number {
  return Math.ceil(bytes / BLOCK_BYTES) * BLOCK_BYTES;
}

function pad(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(padded(data.byteLength));
  out.set(data);
  return out;
}

function concat(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((sum, c) => sum + c.byteLength, 0));
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
