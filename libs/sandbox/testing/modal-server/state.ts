import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ServerSandbox } from './sandbox.js';

/** Modal's default sandbox lifetime when a create request names none: five minutes. */
const DEFAULT_SANDBOX_LIFETIME_SECS = 300;

function newId(prefix: string): string {
  // 24 characters: a `sb-` id of this length reads as a V2 sandbox to the SDK (V1 ids have 22).
  return `${prefix}-${randomBytes(18).toString('base64url').replace(/[-_]/g, 'x')}`;
}

export interface CreateSandboxRequest {
  appId: string;
  imageId: string;
  timeoutSecs: number;
  workdir: string | undefined;
  env: Record<string, string>;
  tags: Record<string, string>;
  /** mount path → volume id */
  volumes: Record<string, string>;
}

/**
 * What the local Modal server knows: apps, images, secrets, volumes and sandboxes. Everything the
 * control plane and the command router answer comes from here.
 */
export class ModalServerState {
  readonly rootDir: string;
  readonly apps = new Map<string, string>(); // `${environment}/${name}` → appId
  readonly images = new Map<string, string>(); // imageId → dockerfile commands (joined)
  readonly imagesByDefinition = new Map<string, string>();
  readonly secrets = new Map<string, { id: string; env: Record<string, string> }>(); // name → secret
  readonly volumes = new Map<string, string>(); // name → volumeId
  readonly sandboxes = new Map<string, ServerSandbox>();
  /** Registry tags (the first `FROM`) whose builds fail, and why. */
  readonly failingBuilds = new Map<string, string>();
  #lastCreatedAt = 0;

  constructor(rootDir: string) {
    this.rootDir = rootDir;
  }

  appFor(environment: string, name: string, create: boolean): string | undefined {
    const key = `${environment}/${name}`;
    let id = this.apps.get(key);
    if (id === undefined && create) {
      id = newId('ap');
      this.apps.set(key, id);
    }
    return id;
  }

  /** Returns the image id for a definition (the same definition is the same image, as on Modal). */
  imageFor(dockerfileCommands: readonly string[]): string {
    const key = dockerfileCommands.join('\n');
    let id = this.imagesByDefinition.get(key);
    if (id === undefined) {
      id = newId('im');
      this.imagesByDefinition.set(key, id);
      this.images.set(id, key);
    }
    return id;
  }

  defineSecret(name: string, env: Record<string, string>): void {
    this.secrets.set(name, { id: newId('st'), env: { ...env } });
  }

  secretById(id: string): { id: string; env: Record<string, string> } | undefined {
    return [...this.secrets.values()].find((s) => s.id === id);
  }

  volumeFor(name: string, create: boolean): string | undefined {
    let id = this.volumes.get(name);
    if (id === undefined && create) {
      id = newId('vo');
      this.volumes.set(name, id);
    }
    return id;
  }

  volumeName(id: string): string | undefined {
    return [...this.volumes.entries()].find(([, v]) => v === id)?.[0];
  }

  createSandbox(request: CreateSandboxRequest): ServerSandbox {
    const id = newId('sb');
    const dir = join(this.rootDir, id);
    mkdirSync(dir, { recursive: true });
    // Strictly increasing, so SandboxListV2's `beforeTimestamp` pages never skip or repeat one.
    this.#lastCreatedAt = Math.max(Date.now() / 1000, this.#lastCreatedAt + 0.001);
    const volumes: Record<string, string> = {};
    for (const [path, volumeId] of Object.entries(request.volumes)) volumes[path] = this.volumeName(volumeId) ?? volumeId;
    const sandbox = new ServerSandbox({
      id,
      taskId: newId('ta'),
      appId: request.appId,
      imageId: request.imageId,
      dir,
      env: request.env,
      tags: request.tags,
      volumes,
      workdir: request.workdir,
      lifetimeMs: (request.timeoutSecs > 0 ? request.timeoutSecs : DEFAULT_SANDBOX_LIFETIME_SECS) * 1000,
      createdAt: this.#lastCreatedAt,
    });
    this.sandboxes.set(id, sandbox);
    return sandbox;
  }

  sandboxByTask(taskId: string): ServerSandbox | undefined {
    return [...this.sandboxes.values()].find((s) => s.taskId === taskId);
  }
}
