import { readFileSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SandboxTags } from '@lanes/contracts';
import type { IsolationMode } from './isolation.js';

/** File name of the per-sandbox record inside `<baseDir>/<id>/`. */
export const RECORD_FILE = 'sandbox.json';

/**
 * What another process needs to find and kill a local sandbox it did not create (the supervisor
 * reaping a SIGKILLed worker's sandboxes). Pids are paired with their /proc start time so a
 * recycled pid is never mistaken for the sandbox.
 */
export interface SandboxRecord {
  version: 1;
  id: string;
  tags: Partial<SandboxTags>;
  image?: string;
  isolation: IsolationMode;
  /** The host pid whose SIGKILL ends the sandbox (`unshare`, or the init in a process group). */
  rootPid: number;
  rootStartTime: number;
  /** Host pid of the namespace's pid 1; the sandbox is fully gone once it is. Namespace mode only. */
  nsInitPid?: number;
  nsInitStartTime?: number;
  /** The process that created it (same host); the sandbox ends with it through the lifeline. */
  ownerPid?: number;
  ownerStartTime?: number;
  workdir: string;
  /** `separate-uid` only: the uid the sandbox runs as; its lease is released when it is reaped. */
  agentUid?: number;
  createdAt: string;
}

/** Ids become directory names; anything else (`..`, `/`) must never reach the filesystem. */
const SANDBOX_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function isValidSandboxId(id: string): boolean {
  return SANDBOX_ID_PATTERN.test(id);
}

export function sandboxDir(baseDir: string, id: string): string {
  return join(baseDir, id);
}

/** Atomic (write + rename) so a reader in another process never sees half a record. */
export async function writeRecord(baseDir: string, record: SandboxRecord): Promise<void> {
  const dir = sandboxDir(baseDir, record.id);
  await mkdir(dir, { recursive: true });
  const temporary = join(dir, `.${RECORD_FILE}.${process.pid}.tmp`);
  await writeFile(temporary, `${JSON.stringify(record, null, 2)}\n`);
  await rename(temporary, join(dir, RECORD_FILE));
}

/** The record for `id`, or undefined when there is none (never created here, or already removed). */
export async function readRecord(baseDir: string, id: string): Promise<SandboxRecord | undefined> {
  if (!isValidSandboxId(id)) return undefined;
  let text: string;
  try {
    text = await readFile(join(sandboxDir(baseDir, id), RECORD_FILE), 'utf8');
  } catch {
    return undefined;
  }
  return parseRecord(text, id);
}

/** readRecord without the thread pool: a few hundred bytes, read where a decision waits on it. */
export function readRecordSync(baseDir: string, id: string): SandboxRecord | undefined {
  if (!isValidSandboxId(id)) return undefined;
  try {
    return parseRecord(readFileSync(join(sandboxDir(baseDir, id), RECORD_FILE), 'utf8'), id);
  } catch {
    return undefined;
  }
}

export async function listRecords(baseDir: string): Promise<SandboxRecord[]> {
  let names: string[];
  try {
    names = await readdir(baseDir);
  } catch {
    return [];
  }
  const records = await Promise.all(names.filter(isValidSandboxId).map((id) => readRecord(baseDir, id)));
  return records.filter((r): r is SandboxRecord => r !== undefined);
}

function parseRecord(text: string, id: string): SandboxRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Partial<SandboxRecord>;
  const valid =
    record.version === 1 &&
    record.id === id &&
    Number.isInteger(record.rootPid) &&
    Number.isInteger(record.rootStartTime) &&
    (record.isolation === 'separate-uid' || record.isolation === 'pid-namespace' || record.isolation === 'process-group') &&
    typeof record.tags === 'object' &&
    record.tags !== null;
  return valid ? (record as SandboxRecord) : undefined;
}
