export {
  LanesClient,
  REQUEST_TIMEOUT_MS,
  EVENTS_RECONNECT_DELAY_MS,
  type LanesClientOptions,
  type EnqueueResult,
  type BulkEnqueueResult,
  type StreamedEvent,
  type EventsOptions,
  type OutputChunk,
  type OutputOptions,
} from './lanes-client.js';
export type { EventGap } from '@lanes/contracts';
export { LanesApiError, LanesUnreachableError } from './client-errors.js';
export { SseFrameParser, type SseFrame } from './sse-frames.js';
