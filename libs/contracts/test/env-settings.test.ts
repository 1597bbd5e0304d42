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
