import { LanesError } from './lanes-error.js';

/** One file-sync batch failed or missed its deadline; the batch is named so it can be found. */
export class SyncBatchError extends LanesError {
  readonly code = 'SYNC_BATCH_FAILED';
  readonly retry = 'transient' as const;
  constructor(
    readonly batch: number,
    readonly batches: number,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`file sync batch ${batch}/${batches} failed: ${detail}`, options);
  }
}
