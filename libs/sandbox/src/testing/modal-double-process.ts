import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { exitCodeOf } from '../exec-result.js';
import type { ModalProcessLike, ModalReadStreamLike } from '../modal-client.js';

/** What the double's sandbox needs to know about one exec'd process. */
export interface DoubleExecSpec {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  /** The SDK's server-side backstop: the exec'd process (not what it started elsewhere) is killed. */
  timeoutMs?: number;
}

function textStream(source: Readable | null): ModalReadStreamLike<string> {
  const stream = new ReadableStream<string>({
    start(controller) {
      if (!source) {
        controller.close();
        return;
      }
      source.setEncoding('utf8');
      source.on('data', (chunk: string) => controller.enqueue(chunk));
      source.once('end', () => controller.close());
      source.once('error', (err) => controller.error(err));
    },
    cancel() {
      source?.destroy();
    },
  });
  return Object.assign(stream, {
    async readText(): Promise<string> {
      let out = '';
      const reader = stream.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return out;
        out += value;
      }
    },
  });
}

/**
 * A ContainerProcess backed by a real local process. Like the SDK's, it has no kill method: the only
 * ways to stop it are the command ending, the backstop timeout, or the sandbox dying.
 *
 * When the sandbox dies while the process runs, `wait()` never settles by default: that is what the
 * real SDK does (its exec-wait retries against a command router that is gone), and it is the hang
 * the provider must race with `poll()`.
 */
export class DoubleContainerProcess implements ModalProcessLike {
  readonly stdout: ModalReadStreamLike<string>;
  readonly stderr: ModalReadStreamLike<string>;
  readonly child: ChildProcess;
  readonly #exited: Promise<number>;
  #sandboxDied = false;
  #hangOnDeath: boolean;

  constructor(spec: DoubleExecSpec, options: { hangOnSandboxDeath: boolean }) {
    this.#hangOnDeath = options.hangOnSandboxDeath;
    const [file, ...args] = spec.argv;
    // detached: each exec leads its own group, so the sandbox can sweep it even off /proc.
    this.child = spawn(file ?? '', args, { cwd: spec.cwd, env: spec.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    this.stdout = textStream(this.child.stdout);
    this.stderr = textStream(this.child.stderr);
    let spawnError: Error | undefined;
    this.#exited = new Promise<number>((resolve) => {
      // A command that cannot start (missing binary or workdir) exits 127 with the reason on stderr,
      // as a shell in a container would.
      this.child.once('error', (err) => {
        spawnError = err;
        resolve(127);
      });
      this.child.once('exit', (code, signal) => resolve(spawnError ? 127 : exitCodeOf(code, signal)));
    });
    let backstop: NodeJS.Timeout | undefined;
    if (spec.timeoutMs !== undefined) {
      backstop = setTimeout(() => this.child.kill('SIGKILL'), spec.timeoutMs);
      backstop.unref();
    }
    void this.#exited.then(() => clearTimeout(backstop));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && this.child.pid !== undefined;
  }

  /** Called by the sandbox when it dies underneath this process. */
  markSandboxDied(): void {
    this.#sandboxDied = true;
  }

  async wait(): Promise<number> {
    const code = await this.#exited;
    if (this.#sandboxDied && this.#hangOnDeath) return new Promise<number>(() => {});
    return code;
  }
}
