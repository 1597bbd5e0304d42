import type { Logger } from 'pino';
import type { SandboxProvider } from '@lanes/sandbox';

/**
 * Terminates sandboxes by id until the provider confirms it (failure 2: a failed sandbox that is
 * never terminated keeps burning compute). A refused or unreachable terminate is kept and tried
 * again on every `retryPending` (each heartbeat) until it goes through; "already gone" is success
 * (the providers' contract).
 */
export class Terminator {
  readonly #pending = new Map<string, { reason: string; attempts: number }>();

  constructor(private readonly deps: { provider: SandboxProvider; log: Logger }) {}

  /** Tries now; on failure the id stays pending. Never throws: recovery must not stall on it. */
  async terminate(id: string, reason: string): Promise<void> {
    this.#pending.set(id, { reason, attempts: this.#pending.get(id)?.attempts ?? 0 });
    await this.#attempt(id);
  }

  /** Ids whose termination is not confirmed yet. */
  pending(): string[] {
    return [...this.#pending.keys()];
  }

  async retryPending(): Promise<void> {
    for (const id of [...this.#pending.keys()]) await this.#attempt(id);
  }

  async #attempt(id: string): Promise<void> {
    const entry = this.#pending.get(id);
    if (!entry) return;
    entry.attempts++;
    try {
      await this.deps.provider.terminateById(id);
      this.#pending.delete(id);
      if (entry.attempts > 1) this.deps.log.info({ event: 'sandbox.terminated', sandboxId: id, attempts: entry.attempts, reason: entry.reason }, 'sandbox.terminated');
    } catch (err) {
      this.deps.log.warn(
        { event: 'sandbox.terminate-failed', sandboxId: id, attempts: entry.attempts, reason: entry.reason, err: String(err) },
        'sandbox.terminate-failed; retried each beat until confirmed',
      );
    }
  }
}
