// Host-side access to the same /proc helpers the sandbox init uses (one implementation, plain JS
// so the init can run on bare node; types come from runtime/proc.d.mts).
export {
  readStat,
  isAlive,
  isRunningState,
  scanProcesses,
  hasEnvEntry,
  readEnvEntry,
  findByEnvEntry,
  scanEnvEntry,
  settleUnreadable,
  unreadableTracker,
  mayBeMember,
  UNREADABLE_SETTLE_MS,
  childrenOf,
  type ProcStat,
} from '../runtime/proc.mjs';
