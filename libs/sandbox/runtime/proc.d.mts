/** Types for proc.mjs, which stays plain JS so the sandbox init runs on bare `node`. */
export interface ProcStat {
  pid: number;
  /** One-letter state from /proc/<pid>/stat: R, S, D, Z (zombie), T, X (dead), … */
  state: string;
  ppid: number;
  /** Process group id. */
  pgrp: number;
  /** Clock ticks since boot; with the pid it identifies a process across pid reuse. */
  startTime: number;
  /** A kernel thread: it has no environment and is never a sandbox's member. */
  kernelThread: boolean;
}
export const UNREADABLE_SETTLE_MS: number;
export function readEnvEntry(pid: number, entry: string): 'match' | 'other' | 'unreadable';
export function scanEnvEntry(entry: string, exclude?: ReadonlySet<number>, bornSince?: number): { members: ProcStat[]; unreadable: ProcStat[] };
export function settleUnreadable(
  since: ReadonlyMap<string, number>,
  unreadable: readonly ProcStat[],
  nowMs: number,
  settleMs: number,
): { since: Map<string, number>; settling: number };
export function mayBeMember(stat: ProcStat, bornSince?: number): boolean;
export function unreadableTracker(settleMs: number, now?: () => number): { settling(unreadable: readonly ProcStat[]): number };
export function readStat(pid: number): ProcStat | undefined;
export function isRunningState(state: string): boolean;
export function isAlive(pid: number, startTime?: number): boolean;
export function scanProcesses(): ProcStat[];
export function hasEnvEntry(pid: number, entry: string): boolean;
export function findByEnvEntry(entry: string, exclude?: ReadonlySet<number>): ProcStat[];
export function childrenOf(pid: number): number[];
