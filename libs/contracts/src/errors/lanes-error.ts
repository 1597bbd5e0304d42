/** Whether retrying the same thing can succeed. */
export type RetryClass = 'permanent' | 'transient';

/** Base of the typed taxonomy: branch on the class or `code`, never on the message. */
export abstract class LanesError extends Error {
  abstract readonly code: string;
  abstract readonly retry: RetryClass;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
