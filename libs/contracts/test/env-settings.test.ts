import { describe, expect, it } from 'vitest';
import { ConfigError, parseEnv } from '@lanes/contracts';

describe('LANES_BOARD_READONLY', () => {
  it.each<[string | undefined, boolean]>([
    [undefined, false],
    ['', false],
    ['0', false],
    ['false', false],
    ['1', true],
    ['true', true],
  ])('%j reads as %s', (raw, readOnly) => {
    expect(parseEnv({ LANES_BOARD_READONLY: raw }).LANES_BOARD_READONLY).toBe(readOnly);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => parseEnv({ LANES_BOARD_READONLY: 'yes' })).toThrow(ConfigError);
    expect(() => parseEnv({ LANES_BOARD_READONLY: 'yes' })).toThrow(/LANES_BOARD_READONLY/);
  });
});

describe('LANES_LOG_FORMAT', () => {
  it.each([
    [undefined, undefined],
    ['json', 'json'],
    ['pretty', 'pretty'],
  ])('%j reads as %j', (raw, format) => {
    expect(parseEnv({ LANES_LOG_FORMAT: raw }).LANES_LOG_FORMAT).toBe(format);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => parseEnv({ LANES_LOG_FORMAT: 'yaml' })).toThrow(/LANES_LOG_FORMAT/);
  });
});

describe('LANES_SSE_MAX_STREAMS and LANES_SSE_MAX_STREAMS_PER_TOKEN', () => {
  it('default to 200 and 20, and read whole numbers of at least 1', () => {
    expect(parseEnv({})).toMatchObject({ LANES_SSE_MAX_STREAMS: 200, LANES_SSE_MAX_STREAMS_PER_TOKEN: 20 });
    expect(parseEnv({ LANES_SSE_MAX_STREAMS: '500', LANES_SSE_MAX_STREAMS_PER_TOKEN: '1' })).toMatchObject({ LANES_SSE_MAX_STREAMS: 500, LANES_SSE_MAX_STREAMS_PER_TOKEN: 1 });
  });

  it.each([
    ['LANES_SSE_MAX_STREAMS', '0'],
    ['LANES_SSE_MAX_STREAMS', 'many'],
    ['LANES_SSE_MAX_STREAMS_PER_TOKEN', '2.5'],
  ])('refuses %s=%s, naming the variable', (name, raw) => {
    expect(() => parseEnv({ [name]: raw })).toThrow(new RegExp(name));
  });
});
