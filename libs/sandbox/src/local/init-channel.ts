import type { Readable, Writable } from 'node:stream';
import { agentLimits } from '@lanes/contracts';
import { decideRead, type ReadWindow } from '../read-budget.js';

/** Messages the sandbox init sends (see runtime/local-init.mjs for the protocol). */
export type InitEvent =
  | { t: 'pong'; id: number }
  | { t: 'started'; id: number; pid: number }
  | { t: 'out'; id: number; s: 1 | 2; d: string }
  /** alone: the init saw no other process in the sandbox once the command ended (PID namespace only). */
  | { t: 'exit'; id: number; code: number; timedOut: boolean; cancelled: boolean; alone?: boolean }
  /** The init is ending the sandbox (its lifetime ran out) and will exit with `code`: for no request. */
  | { t: 'ending'; code: number }
  | StartCanaryEvent;

/** Written by the sandbox's shell, not the init, while the init starts (start-canary.ts). */
export type StartCanaryEvent = { t: 'canary'; nonce: string } | { t: 'canary-failed' };

export type InitRequest =
  | { op: 'ping' }
  | {
      op: 'exec';
      argv: readonly string[];
      cwd?: string;
      env?: Record<string, string>;
      timeoutMs?: number;
      graceMs: number;
      /** Kill what the command left running once it has exited (ExecOptions.endLeftovers). */
      endLeftovers?: boolean;
    };

/**
 * The host end of one init's JSON-lines control channel. It stays open for the sandbox's life, so an
 * exec costs one line each way and no process or file set-up (this is what keeps exec overhead low).
 * Requests get increasing ids; events are routed to the listener registered for their id.
 */
export class InitChannel {
  private nextId = 1;
  private readonly listeners = new Map<number, (event: InitEvent) => void>();
  private pendingOutput = '';
  private open = true;
  private endingListener: ((code: number) => void) | undefined;
  private startCanaryListener: ((event: StartCanaryEvent) => void) | undefined;
  private readWindow: ReadWindow | undefined;
  private resumeTimer: NodeJS.Timeout | undefined;

  /** `outputBytesPerS`: how fast the channel is read (read-budget.ts); a command that prints faster waits. */
  constructor(
    private readonly input: Writable,
    private readonly output: Readable,
    private readonly outputBytesPerS: number = agentLimits.SANDBOX_OUTPUT_MAX_BYTES_PER_S,
  ) {
    output.setEncoding('utf8');
    output.on('data', (chunk: string) => {
      this.budget(chunk);
      this.onData(chunk);
    });
    // The init dying is observed through the root's exit; a broken pipe adds nothing.
    input.on('error', () => {
      this.open = false;
    });
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** Sends a request; `onEvent` receives every event for it until `forget(id)`. */
  request(request: InitRequest, onEvent: (event: InitEvent) => void): number {
    const id = this.nextId;
    this.nextId += 1;
    this.listeners.set(id, onEvent);
    this.write({ ...request, id });
    return id;
  }

  cancel(id: number): void {
    this.write({ op: 'cancel', id });
  }

  forget(id: number): void {
    this.listeners.delete(id);
  }

  /** `listener` hears the init announce that it is ending the sandbox, with the code it will exit with. */
  onEnding(listener: (code: number) => void): void {
    this.endingListener = listener;
  }

  /**
   * `listener` hears the first start canary line (start-canary.ts), once; any later one is
   * ignored, so nothing a command writes on the channel afterwards can pass for it.
   */
  onStartCanary(listener: (event: StartCanaryEvent) => void): void {
    this.startCanaryListener = listener;
  }

  /** Stops talking to the init without killing it (the sandbox survives for reaping by id). */
  close(): void {
    this.open = false;
    this.listeners.clear();
    this.input.destroy();
    clearTimeout(this.resumeTimer);
  }

  private budget(chunk: string): void {
    const decision = decideRead(this.readWindow, Buffer.byteLength(chunk), performance.now(), this.outputBytesPerS);
    this.readWindow = decision.window;
    if (decision.action === 'read' || this.resumeTimer) return;
    this.output.pause();
    this.resumeTimer = setTimeout(() => {
      this.resumeTimer = undefined;
      this.output.resume();
    }, decision.resumeInMs);
    // The channel's pause must not keep a process alive that would otherwise end.
    this.resumeTimer.unref();
  }

  private write(message: object): void {
    if (this.open) this.input.write(`${JSON.stringify(message)}\n`);
  }

  private onData(chunk: string): void {
    this.pendingOutput += chunk;
    let newline = this.pendingOutput.indexOf('\n');
    while (newline !== -1) {
      const line = this.pendingOutput.slice(0, newline);
      this.pendingOutput = this.pendingOutput.slice(newline + 1);
      if (line.length > 0) this.dispatch(line);
      newline = this.pendingOutput.indexOf('\n');
    }
  }

  private dispatch(line: string): void {
    let event: InitEvent;
    try {
      event = JSON.parse(line) as InitEvent;
    } catch {
      return; // not ours: the protocol only ever writes whole JSON lines
    }
    if (event.t === 'ending') {
      this.endingListener?.(event.code);
      return;
    }
    if (event.t === 'canary' || event.t === 'canary-failed') {
      const listener = this.startCanaryListener;
      this.startCanaryListener = undefined;
      listener?.(event);
      return;
    }
    this.listeners.get(event.id)?.(event);
  }
}
