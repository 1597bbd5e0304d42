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
}
export function readStat(pid: number): ProcStat | undefined;
export function isRunningState(state: string): boolean;
export function isAlive(pid: number, startTime?: number): boolean;
export function scanProcesses(): ProcStat[];
export function hasEnvEntry(pid: number, entry: string): boolean;
export function findByEnvEntry(entry: string, exclude?: ReadonlySet<number>): ProcStat[];
export function childrenOf(pid: number): number[];
