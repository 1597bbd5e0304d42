import { ServerError, Status, type CallContext, type ServerMiddleware } from 'nice-grpc';

/**
 * Which RPCs a fault applies to: one method name as on the wire (`SandboxWaitV2`, `TaskExecWait`),
 * several, or a whole service (`ModalClient` is the control plane, `TaskCommandRouter` the router).
 */
export type RpcTarget = string | readonly string[];

export interface FailOptions {
  /** gRPC status to answer with; default UNAVAILABLE. */
  code?: Status;
  /** Fail this many matching calls (default 1 unless `forMs` is given). */
  times?: number;
  /** Fail every matching call for this long from now. */
  forMs?: number;
  /** Only calls about this sandbox (by sandboxId, or its taskId on the router). */
  sandboxId?: string;
  /**
   * Only exec starts (`TaskExecStart`) whose command has an argv entry containing this text, e.g. the
   * agent's path: one command's start fails while the kill execs and canaries around it go through.
   */
  argvIncludes?: string;
  /**
   * A server retry-after, as Modal throttles (with RESOURCE_EXHAUSTED): the answer carries a
   * `modal.client.RPCRetryPolicy { retryAfterSecs }` in its `grpc-status-details-bin` trailer, which
   * the SDK's control-plane retryMiddleware waits out and retries, bounded by the client's
   * `maxThrottleWaitSecs`.
   */
  retryAfterSecs?: number;
}

interface FailRule {
  target: RpcTarget;
  code: Status;
  remaining: number;
  until: number;
  sandboxId: string | undefined;
  argvIncludes: string | undefined;
  retryAfterSecs: number | undefined;
}

/** What the middleware knows about one call. */
export interface RpcCall {
  service: string;
  method: string;
  /** The sandbox the call is about, when the request names one. */
  sandboxId: string | undefined;
  /** An exec start's command argv (`TaskExecStartRequest.commandArgs`); absent for other calls. */
  argv?: readonly string[];
}

function matches(target: RpcTarget, call: RpcCall): boolean {
  const names = typeof target === 'string' ? [target] : target;
  return names.includes(call.method) || names.includes(call.service);
}

/**
 * The fault plan and the call counter of a local Modal server. Tests arrange failures and delays
 * here; the server middleware consults it on every call (before the handler runs) and counts it.
 */
export class ModalFaults {
  readonly #rules: FailRule[] = [];
  readonly #delays = new Map<string, { ms: number; remaining: number; sandboxId: string | undefined }>();
  readonly #delayed = new Map<string, number>();
  readonly #counts = new Map<string, number>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Answers matching calls with an error status (a burst by count or by time window). */
  fail(target: RpcTarget, options: FailOptions = {}): void {
    const byTime = options.forMs !== undefined;
    this.#rules.push({
      target,
      code: options.code ?? Status.UNAVAILABLE,
      remaining: options.times ?? (byTime ? Number.POSITIVE_INFINITY : 1),
      until: byTime ? this.#now() + (options.forMs ?? 0) : Number.POSITIVE_INFINITY,
      sandboxId: options.sandboxId,
      argvIncludes: options.argvIncludes,
      retryAfterSecs: options.retryAfterSecs,
    });
  }

  /**
   * Every matching call waits this long before it is answered (0 removes the delay); with `times`,
   * only that many calls (a latency spike, e.g. one slow canary); with `sandboxId`, only calls
   * about that sandbox (one hung poll among healthy ones).
   */
  delay(method: string, ms: number, options: { times?: number; sandboxId?: string } = {}): void {
    if (ms > 0) this.#delays.set(method, { ms, remaining: options.times ?? Number.POSITIVE_INFINITY, sandboxId: options.sandboxId });
    else this.#delays.delete(method);
  }

  /** Calls of `method` being held by a delay right now (not yet answered, not cancelled by the client). */
  delayed(method: string): number {
    return this.#delayed.get(method) ?? 0;
  }

  /** Waits out a call's delay, counting it as held meanwhile. */
  async hold(method: string, ms: number, signal: AbortSignal): Promise<void> {
    this.#delayed.set(method, this.delayed(method) + 1);
    try {
      await sleep(ms, signal);
    } finally {
      this.#delayed.set(method, this.delayed(method) - 1);
    }
  }

  clear(): void {
    this.#rules.length = 0;
    this.#delays.clear();
  }

  /** How many calls of `method` the server received (failed ones included), optionally about one sandbox. */
  calls(method: string, sandboxId?: string): number {
    return this.#counts.get(sandboxId === undefined ? method : `${method}@${sandboxId}`) ?? 0;
  }

  /** Calls of every method together. */
  total(): number {
    let n = 0;
    for (const [key, c] of this.#counts) if (!key.includes('@')) n += c;
    return n;
  }

  resetCounts(): void {
    this.#counts.clear();
  }

  /** The error a call must answer with now, if any (and its retry-after); spends one unit of the matching burst. */
  injected(call: RpcCall): { error: ServerError; retryAfterSecs: number | undefined } | undefined {
    const now = this.#now();
    for (let i = 0; i < this.#rules.length; i++) {
      const rule = this.#rules[i]!;
      if (rule.remaining <= 0 || now >= rule.until) {
        this.#rules.splice(i--, 1);
        continue;
      }
      if (!matches(rule.target, call)) continue;
      if (rule.sandboxId !== undefined && rule.sandboxId !== call.sandboxId) continue;
      const marker = rule.argvIncludes;
      if (marker !== undefined && !(call.argv ?? []).some((a) => a.includes(marker))) continue;
      rule.remaining--;
      return { error: new ServerError(rule.code, `injected ${Status[rule.code]} for ${call.method}`), retryAfterSecs: rule.retryAfterSecs };
    }
    return undefined;
  }

  /** The delay the next call of `method` waits; spends one unit of a counted spike. */
  delayFor(method: string, sandboxId?: string): number {
    const d = this.#delays.get(method);
    if (!d || (d.sandboxId !== undefined && d.sandboxId !== sandboxId)) return 0;
    if (--d.remaining <= 0) this.#delays.delete(method);
    return d.ms;
  }

  count(method: string, sandboxId: string | undefined): void {
    this.#counts.set(method, this.calls(method) + 1);
    if (sandboxId !== undefined) this.#counts.set(`${method}@${sandboxId}`, this.calls(method, sandboxId) + 1);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/**
 * Server middleware: counts the call, waits out any delay, then answers with an injected error or
 * lets the handler run. `sandboxOf` names the sandbox a request is about (for per-sandbox faults).
 */
export function faultMiddleware(
  faults: ModalFaults,
  service: string,
  sandboxOf: (request: unknown) => string | undefined,
  retryPolicyTrailer: (code: Status, retryAfterSecs: number) => Uint8Array,
): ServerMiddleware {
  return async function* inject(call, context: CallContext) {
    const method = call.method.path.slice(call.method.path.lastIndexOf('/') + 1);
    // A client-streaming request is an iterable: only unary and server-streaming requests name a sandbox.
    const sandboxId = call.requestStream ? undefined : sandboxOf(call.request);
    faults.count(method, sandboxId);
    const ms = faults.delayFor(method, sandboxId);
    if (ms > 0) await faults.hold(method, ms, context.signal);
    const argv = call.requestStream ? undefined : (call.request as { commandArgs?: string[] } | undefined)?.commandArgs;
    const injected = faults.injected({ service, method, sandboxId, ...(argv ? { argv } : {}) });
    if (injected) {
      if (injected.retryAfterSecs !== undefined) context.trailer.set('grpc-status-details-bin', retryPolicyTrailer(injected.error.code, injected.retryAfterSecs));
      throw injected.error;
    }
    return yield* call.next(call.request, context);
  };
}
