import { afterEach, describe, expect, it } from 'vitest';
import { ProviderInvalidError } from '@lanes/contracts';
import { createModalClient } from '@lanes/sandbox/modal';

/** The SDK reads MODAL_SANDBOX_V2 from the process environment when a client is built (modal@0.11.1 getProfile). */
describe('createModalClient and the SDK’s V1 sandbox path', () => {
  const before = process.env['MODAL_SANDBOX_V2'];
  afterEach(() => {
    if (before === undefined) delete process.env['MODAL_SANDBOX_V2'];
    else process.env['MODAL_SANDBOX_V2'] = before;
  });
  const build = () => createModalClient({ tokenId: 'ak-test', tokenSecret: 'as-test' });

  it.each(['false', '0', 'FALSE'])('MODAL_SANDBOX_V2=%s is refused at construction as a configuration error, saying what to unset', (value) => {
    process.env['MODAL_SANDBOX_V2'] = value;
    expect(build).toThrow(ProviderInvalidError);
    expect(build).toThrow(/V1 sandboxes are not supported: unset MODAL_SANDBOX_V2/);
  });

  it.each([undefined, 'true', '1'])('MODAL_SANDBOX_V2=%s builds a V2 client', (value) => {
    if (value === undefined) delete process.env['MODAL_SANDBOX_V2'];
    else process.env['MODAL_SANDBOX_V2'] = value;
    const client = build();
    expect(client).toBeDefined();
    client.close();
  });
});
