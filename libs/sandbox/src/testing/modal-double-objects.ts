import type { ModalAppLike, ModalImageLike, ModalSecretLike } from '../modal-client.js';
import type { DoubleOp } from './modal-double-sandbox.js';

/** What an image needs from the double to build itself. */
export interface ImageBuilder {
  rpc(op: DoubleOp): Promise<void>;
  /** Returns the new image id, or throws a plain Error the way the SDK reports a failed build. */
  buildImage(image: DoubleImage, app: ModalAppLike): string;
}

/** Like the SDK's Image: lazy until built; `dockerfileCommands` returns a new, unbuilt image. */
export class DoubleImage implements ModalImageLike {
  constructor(
    private readonly double: ImageBuilder,
    readonly tag: string,
    readonly layers: readonly string[][],
    public imageId = '',
  ) {}
  dockerfileCommands(commands: string[]): ModalImageLike {
    if (commands.length === 0) return this;
    return new DoubleImage(this.double, this.tag, [...this.layers, [...commands]]);
  }
  async build(app: ModalAppLike): Promise<ModalImageLike> {
    if (this.imageId) return this;
    await this.double.rpc('image');
    this.imageId = this.double.buildImage(this, app);
    return this;
  }
}

/** Like the SDK's Secret, carrying its entries so the double can put them in the sandbox env. */
export class DoubleSecret implements ModalSecretLike {
  constructor(readonly name: string, readonly secretId: string, readonly entries: Record<string, string>) {}
}
