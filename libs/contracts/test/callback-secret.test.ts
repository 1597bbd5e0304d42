import { describe, expect, it } from 'vitest';
import { ConfigError, laneCallbackSecrets, parseLanesConfig } from '@lanes/contracts';

const OWN = { fromEnv: 'BOARD_A_CALLBACK_SECRET', previousFromEnv: 'BOARD_A_CALLBACK_SECRET_OLD' };

function issuesOf(run: () => unknown): string[] {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  return expect.unreachable('should refuse') as never;
}

describe("a lane's own callback secret", () => {
  it('is named by the variables that hold it, never by its value', () => {
    const config = parseLanesConfig({
      lanes: [
        { name: 'a', agent: ['true'], callbackSecret: OWN },
        { name: 'b', agent: ['true'] },
      ],
    });
    expect(config.lanes[0]!.callbackSecret).toEqual(OWN);
    expect(config.lanes[1]!.callbackSecret).toBeUndefined();
    expect(issuesOf(() => parseLanesConfig({ lanes: [{ name: 'a', agent: ['true'], callbackSecret: { fromEnv: 'X', value: 'in the file' } }] }))).toEqual([
      expect.stringMatching(/^lanes\.0\.callbackSecret: /),
    ]);
    expect(issuesOf(() => parseLanesConfig({ lanes: [{ name: 'a', agent: ['true'], callbackSecret: { fromEnv: 'NOT-A-VAR' } }] }))).toEqual([
      expect.stringMatching(/^lanes\.0\.callbackSecret\.fromEnv: /),
    ]);
  });

  it.each([
    ["a token's variable", { tokens: [{ name: 'board-a', fromEnv: 'BOARD_A_TOKEN', lanes: ['a'], role: 'write' }] }, 'BOARD_A_TOKEN', 'API token "board-a"'],
    ["its own callback secret's variable", {}, 'BOARD_A_CALLBACK_SECRET', "lane a's callback secret"],
    ['the old one of a rotation', {}, 'BOARD_A_CALLBACK_SECRET_OLD', "lane a's callback secret"],
  ])('a local lane may not hand %s to its agents', (_what, extra, name, holder) => {
    const config = {
      lanes: [
        { name: 'a', agent: ['true'], callbackSecret: OWN },
        { name: 'b', agent: ['true'], secrets: ['GITHUB_TOKEN', name] },
      ],
      ...extra,
    };
    expect(issuesOf(() => parseLanesConfig(config))).toEqual([`lanes.1.secrets.1: ${name} holds ${holder} and never reaches an agent`]);
  });

  it("a Modal lane's secrets are Modal Secret names, not the worker's variables: not refused", () => {
    expect(() =>
      parseLanesConfig({
        lanes: [
          { name: 'a', agent: ['true'], callbackSecret: OWN },
          { name: 'm', provider: 'modal', agent: ['true'], secrets: ['BOARD_A_CALLBACK_SECRET'] },
        ],
      }),
    ).not.toThrow();
  });

  it('is read from the environment, current first; a lane without one is absent', () => {
    const lanes = parseLanesConfig({
      lanes: [
        { name: 'a', agent: ['true'], callbackSecret: OWN },
        { name: 'b', agent: ['true'], callbackSecret: { fromEnv: 'B_SECRET' } },
        { name: 'c', agent: ['true'] },
      ],
    }).lanes;
    const secrets = laneCallbackSecrets(lanes, { BOARD_A_CALLBACK_SECRET: 'a'.repeat(16), BOARD_A_CALLBACK_SECRET_OLD: 'o'.repeat(20), B_SECRET: 'b'.repeat(32) });
    expect([...secrets]).toEqual([
      ['a', ['a'.repeat(16), 'o'.repeat(20)]],
      ['b', ['b'.repeat(32)]],
    ]);
  });

  it('refuses to start on a variable that is unset or too short, naming the field and the variable, never a value', () => {
    const lanes = parseLanesConfig({
      lanes: [
        { name: 'a', agent: ['true'] },
        { name: 'b', agent: ['true'], callbackSecret: OWN },
      ],
    }).lanes;
    const issues = issuesOf(() => laneCallbackSecrets(lanes, { BOARD_A_CALLBACK_SECRET_OLD: 'short-value' }));
    expect(issues).toEqual([
      'lanes.1.callbackSecret.fromEnv: BOARD_A_CALLBACK_SECRET is unset',
      'lanes.1.callbackSecret.previousFromEnv: BOARD_A_CALLBACK_SECRET_OLD is shorter than 16 characters',
    ]);
    expect(issues.join()).not.toContain('short-value');
  });
});
