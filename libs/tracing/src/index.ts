export { SDK_MESSAGE_MAX_CHARS, TRACER_NAME, otlpEndpointOf, otlpHeadersOf, startTracing, tracingEnabled, type Tracing, type TracingOptions } from './tracing.js';
export {
  SpanKind,
  activeTraceId,
  activeTraceMetadata,
  activeTraceparent,
  contextOfHeaders,
  contextOfTraceMetadata,
  contextOfTraceparent,
  inSpan,
  markSpanError,
  recordSpan,
  startSpan,
  withContext,
  traceparentOf,
  type Attributes,
  type Context,
  type Span,
  type SpanOptions,
} from './spans.js';
export { bullmqTelemetry } from './bullmq-telemetry.js';
