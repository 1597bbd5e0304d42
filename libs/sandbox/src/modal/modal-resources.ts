import type { ModalAppLike, ModalClientLike, ModalImageLike, ModalSecretLike, ModalVolumeLike } from './modal-client.js';
import { toLanesError } from './modal-errors.js';

/** A Modal image id (as opposed to a registry tag): `im-` followed by an id, nothing else. */
const IMAGE_ID = /^im-[A-Za-z0-9]+$/;

export interface ModalResourceOptions {
  appName: string;
  environment?: string;
  /** Layered on every registry image (e.g. `RUN apt-get install -y procps`). Not applied to image ids. */
  dockerfileCommands: readonly string[];
}

/**
 * Looks up (and caches, per provider) what sandboxes are created from: the app (created if missing),
 * images, secrets and volumes. A lookup in flight is shared; a failed one is forgotten so the next
 * create retries it. A slow image build keeps running after a connect timeout, so a later create
 * finds it built.
 */
export class ModalResources {
  readonly #client: ModalClientLike;
  readonly #options: ModalResourceOptions;
  #app: Promise<ModalAppLike> | undefined;
  readonly #images = new Map<string, Promise<ModalImageLike>>();
  readonly #secrets = new Map<string, Promise<ModalSecretLike>>();
  readonly #volumes = new Map<string, Promise<ModalVolumeLike>>();

  constructor(client: ModalClientLike, options: ModalResourceOptions) {
    this.#client = client;
    this.#options = options;
  }

  app(): Promise<ModalAppLike> {
    this.#app ??= this.#client.apps.fromName(this.#options.appName, { createIfMissing: true, ...this.#env() }).catch((err: unknown) => {
      this.#app = undefined;
      throw toLanesError(err, { kind: 'client' });
    });
    return this.#app;
  }

  /** `ref` is a registry tag (`debian:bookworm-slim`) or a Modal image id (`im-…`). Built before use. */
  image(ref: string): Promise<ModalImageLike> {
    return cached(this.#images, ref, async () => {
      const app = await this.app();
      let image: ModalImageLike;
      try {
        image = IMAGE_ID.test(ref) ? await this.#client.images.fromId(ref) : this.#client.images.fromRegistry(ref);
        if (!IMAGE_ID.test(ref) && this.#options.dockerfileCommands.length > 0) {
          image = image.dockerfileCommands([...this.#options.dockerfileCommands]);
        }
      } catch (err) {
        throw toLanesError(err, { kind: 'client' });
      }
      try {
        return await image.build(app);
      } catch (err) {
        throw toLanesError(err, { kind: 'image-build', image: ref });
      }
    });
  }

  secret(name: string): Promise<ModalSecretLike> {
    return cached(this.#secrets, name, async () => {
      try {
        return await this.#client.secrets.fromName(name, this.#env());
      } catch (err) {
        throw toLanesError(err, { kind: 'client' });
      }
    });
  }

  volume(name: string): Promise<ModalVolumeLike> {
    return cached(this.#volumes, name, async () => {
      try {
        return await this.#client.volumes.fromName(name, { createIfMissing: true, ...this.#env() });
      } catch (err) {
        throw toLanesError(err, { kind: 'client' });
      }
    });
  }

  #env(): { environment?: string } {
    return this.#options.environment ? { environment: this.#options.environment } : {};
  }
}

function cached<T>(cache: Map<string, Promise<T>>, key: string, load: () => Promise<T>): Promise<T> {
  let entry = cache.get(key);
  if (!entry) {
    entry = load().catch((err: unknown) => {
      cache.delete(key);
      throw err;
    });
    cache.set(key, entry);
  }
  return entry;
}
