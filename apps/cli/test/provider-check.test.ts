import { describe, expect, it } from 'vitest';
import { checkProviderCredentials } from '@lanes/cli';
import { ConfigError, parseLanesConfig } from '@lanes/contracts';

const config = parseLanesConfig({
  lanes: [
    { name: 'local-lane', agent: ['true'] },
    { name: 'remote', provider: 'modal', agent: ['true'] },
  ],
});
const localOnly = parseLanesConfig({ lanes: [{ name: 'local-lane', agent: ['true'] }] });

describe('checkProviderCredentials', () => {
  it.each([
    ['tokens in env', { MODAL_TOKEN_ID: 'ak-1', MODAL_TOKEN_SECRET: 'as-1' }, false],
    ['a ~/.modal.toml profile', {}, true],
  ])('accepts a modal lane with %s', (_what, env, profile) => {
    expect(() => checkProviderCredentials(config, env, profile)).not.toThrow();
  });

  it.each([
    ['no credentials at all', {}],
    ['only the token id', { MODAL_TOKEN_ID: 'ak-1' }],
    ['an empty secret', { MODAL_TOKEN_ID: 'ak-1', MODAL_TOKEN_SECRET: '' }],
  ])('refuses a modal lane with %s, naming the lane key', (_what, env) => {
    expect(() => checkProviderCredentials(config, env, false)).toThrow(ConfigError);
    expect(() => checkProviderCredentials(config, env, false)).toThrow('lanes.1.provider');
  });

  it('needs nothing for local lanes', () => {
    expect(() => checkProviderCredentials(localOnly, {}, false)).not.toThrow();
  });
});
