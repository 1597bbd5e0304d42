import { describe, expect, it } from 'vitest';
import { ConfigError, CardValidationError, defaults, parseCard, parseLanesConfig } from '@lanes/contracts';

const lanes = [
  { name: 'a', agent: ['true'] },
  { name: 'b', agent: ['true'] },
];
const SHA = 'AB'.repeat(32);

describe('config tokens', () => {
  it('takes sha256 or fromEnv tokens over lanes or "*", with a role; the hash is kept lower-case', () => {
    const config = parseLanesConfig({
      lanes,
      tokens: [
        { name: 'keda', sha256: SHA, lanes: '*', role: 'read' },
        { name: 'board-a', fromEnv: 'BOARD_A_TOKEN', lanes: ['a'], role: 'write' },
      ],
    });
    expect(config.tokens).toEqual([
      { name: 'keda', sha256: SHA.toLowerCase(), lanes: '*', role: 'read' },
      { name: 'board-a', fromEnv: 'BOARD_A_TOKEN', lanes: ['a'], role: 'write' },
    ]);
    expect(parseLanesConfig({ lanes }).tokens).toBeUndefined();
  });

  it.each([
    { name: 'both sha256 and fromEnv', token: { name: 't', sha256: SHA, fromEnv: 'X', lanes: '*', role: 'read' }, path: 'tokens.0.sha256' },
    { name: 'neither sha256 nor fromEnv', token: { name: 't', lanes: '*', role: 'read' }, path: 'tokens.0.sha256' },
    { name: 'a short hash', token: { name: 't', sha256: 'abc', lanes: '*', role: 'read' }, path: 'tokens.0.sha256' },
    { name: 'a bad env name', token: { name: 't', fromEnv: 'NOT-A-VAR', lanes: '*', role: 'read' }, path: 'tokens.0.fromEnv' },
    { name: 'an unknown lane', token: { name: 't', fromEnv: 'X', lanes: ['a', 'zz'], role: 'read' }, path: 'tokens.0.lanes.1' },
    { name: 'no lanes', token: { name: 't', fromEnv: 'X', lanes: [], role: 'read' }, path: 'tokens.0.lanes' },
    { name: 'an unknown role', token: { name: 't', fromEnv: 'X', lanes: '*', role: 'owner' }, path: 'tokens.0.role' },
    { name: 'a token value in the file', token: { name: 't', value: 'secret', fromEnv: 'X', lanes: '*', role: 'read' }, path: 'tokens.0' },
    { name: 'a name with a space', token: { name: 'my token', fromEnv: 'X', lanes: '*', role: 'read' }, path: 'tokens.0.name' },
    { name: 'a request rate of 0', token: { name: 't', fromEnv: 'X', lanes: '*', role: 'read', requestsPerSecond: 0 }, path: 'tokens.0.requestsPerSecond' },
    {
      name: 'a request rate past its cap',
      token: { name: 't', fromEnv: 'X', lanes: '*', role: 'read', requestsPerSecond: defaults.MAX_TOKEN_REQUESTS_PER_S + 1 },
      path: 'tokens.0.requestsPerSecond',
    },
  ])('refuses $name, naming $path', ({ token, path }) => {
    try {
      parseLanesConfig({ lanes, tokens: [token] });
      expect.unreachable('should refuse');
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.path)).toContain(path);
    }
  });

  it('refuses two tokens of one name', () => {
    const token = { name: 't', fromEnv: 'X', lanes: '*', role: 'read' };
    expect(() => parseLanesConfig({ lanes, tokens: [token, { ...token, fromEnv: 'Y' }] })).toThrow(/tokens\.1\.name: duplicate token name "t"/);
  });
});

describe('card metadata size', () => {
  // {"k":"…"} is 8 bytes of JSON around the string.
  const ofBytes = (n: number) => ({ k: 'x'.repeat(n - 8) });
  it.each([
    { bytes: defaults.MAX_CARD_METADATA_BYTES - 1, ok: true },
    { bytes: defaults.MAX_CARD_METADATA_BYTES, ok: true },
    { bytes: defaults.MAX_CARD_METADATA_BYTES + 1, ok: false },
  ])('$bytes bytes of JSON: accepted $ok', ({ bytes, ok }) => {
    const metadata = ofBytes(bytes);
    expect(JSON.stringify(metadata)).toHaveLength(bytes);
    const parse = () => parseCard({ lane: 'a', title: 't', metadata }, () => 'id');
    if (ok) expect(parse().metadata).toEqual(metadata);
    else expect(parse).toThrow(CardValidationError);
  });

  it('counts UTF-8 bytes, not characters', () => {
    const metadata = { k: 'é'.repeat(defaults.MAX_CARD_METADATA_BYTES / 2) };
    expect(() => parseCard({ lane: 'a', title: 't', metadata }, () => 'id')).toThrow(/metadata: must be at most 65536 bytes as JSON/);
  });
});
