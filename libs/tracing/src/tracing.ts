import { DiagLogLevel, context, diag, propagation, trace, type DiagLogger } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-node';

/**
 * The tracer name of every span lanes starts itself (BullMQ's own spans are under `bullmq`).
 */
export const TRACER_NAME = 'lanes';

export interface TracingOptions {
  /** The process environment: OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) turns tracing on; OTEL_SERVICE_NAME names it. */
  env: Readonly<Record<string, string | undefined>>;
  /**
   * Exports here instead of over OTLP, each span as it ends (tests: an InMemorySpanExporter).
   * Tracing is on whatever `env` says.
   */
  exporter?: SpanExporter;
  /** service.name when OTEL_SERVICE_NAME is unset. */
  serviceName?: string;
  /** Told when the last flush at shutdown fails (the collector is down): the process still stops cleanly. */
  onShutdownError?: (err: unknown) => void;
  /**
   * Told what the SDK reports at warn or error while tracing runs, through its own diagnostic
   * channel: a batch the collector did not take (away, refusing, too slow), spans dropped from a
   * full queue. Without it those go nowhere. Each message is cut to SDK_MESSAGE_MAX_CHARS (a
   * collector's error body is outside input).
   */
  onSdkMessage?: (level: 'error' | 'warn', message: string) => void;
}

/** The most of one SDK diagnostic passed on: enough for the cause, bounded whatever a collector answers. */
export const SDK_MESSAGE_MAX_CHARS = 1_024;

/** A started tracer provider; `shutdown` flushes what is batched and turns tracing off again. It never rejects. */
export interface Tracing {
  readonly enabled: boolean;
  shutdown(): Promise<void>;
}

let enabled = false;

/** Whether this process records spans. Callers test it first, so with tracing off a card costs no span object and no context switch. */
export function tracingEnabled(): boolean {
  return enabled;
}

/**
 * Where traces go, from the OTel SDK's own variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is,
 * else OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`, as the spec says; undefined: no tracing.
 */
export function otlpEndpointOf(env: Readonly<Record<string, string | undefined>>): string | undefined {
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  return env.OTEL_EXPORTER_OTLP_ENDPOINT ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces` : undefined;
}

/** OTEL_EXPORTER_OTLP_HEADERS (`k=v,k2=v2`, values URL-encoded): the collector's credentials. */
export function otlpHeadersOf(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const raw = env.OTEL_EXPORTER_OTLP_TRACES_HEADERS || env.OTEL_EXPORTER_OTLP_HEADERS || '';
  return Object.fromEntries(
    raw
      .split(',')
      .map((pair) => pair.split('='))
      .filter((kv): kv is [string, ...string[]] => kv.length >= 2 && kv[0]!.trim() !== '')
      .map(([k, ...v]) => [decodeURIComponent(k.trim()), decodeURIComponent(v.join('=').trim())]),
  );
}

const OFF: Tracing = { enabled: false, shutdown: async () => undefined };

/**
 * Starts the OpenTelemetry SDK when OTEL_EXPORTER_OTLP_ENDPOINT is set (or an exporter is given):
 * a Node tracer provider (AsyncLocalStorage context, W3C trace-context propagation) that exports
 * over OTLP http/protobuf in batches. Otherwise nothing is loaded: the SDK modules are imported
 * only here, and the API's global tracer stays the no-op one. Call once, before the stack's parts
 * are built (they read `tracingEnabled()` when they make their queues and workers).
 */
export async function startTracing(options: TracingOptions): Promise<Tracing> {
  const endpoint = otlpEndpointOf(options.env);
  if (!options.exporter && !endpoint) return OFF;
  if (enabled) throw new Error('tracing is already started in this process');
  const [{ NodeTracerProvider, BatchSpanProcessor, SimpleSpanProcessor }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
  ]);
  let processor: InstanceType<typeof BatchSpanProcessor> | InstanceType<typeof SimpleSpanProcessor>;
  if (options.exporter) processor = new SimpleSpanProcessor(options.exporter);
  else {
    // Endpoint and headers from the environment given (the process's in production), not read behind its back.
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
    processor = new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint!, headers: otlpHeadersOf(options.env) }));
  }
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': options.env.OTEL_SERVICE_NAME || options.serviceName || 'lanes' }),
    spanProcessors: [processor],
  });
  provider.register();
  if (options.onSdkMessage) diag.setLogger(diagLoggerTo(options.onSdkMessage), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  enabled = true;
  return {
    enabled: true,
    async shutdown() {
      enabled = false;
      // Spans a collector that is away cannot take are lost, not a reason for the process to fail its stop.
      await provider.shutdown().catch((err: unknown) => options.onShutdownError?.(err));
      // Back to the no-op globals, so a later start (another test) registers afresh.
      trace.disable();
      context.disable();
      propagation.disable();
      diag.disable();
    },
  };
}

/** The SDK's diagnostics at warn and above, as one string each (an error's message, not its stack). */
function diagLoggerTo(tell: (level: 'error' | 'warn', message: string) => void): DiagLogger {
  const text = (message: string, args: unknown[]) => [message, ...args.map(argText)].join(' ').slice(0, SDK_MESSAGE_MAX_CHARS);
  const none = () => undefined;
  return {
    error: (message, ...args) => tell('error', text(message, args)),
    warn: (message, ...args) => tell('warn', text(message, args)),
    info: none,
    debug: none,
    verbose: none,
  };
}

function argText(arg: unknown): string {
  if (arg instanceof Error) return arg.message;
  if (typeof arg === 'string') return arg;
  try {
    return JSON.stringify(arg) ?? String(arg);
  } catch {
    return String(arg); // circular: its name is enough
  }
}
