/**
 * What of the worker's environment an agent starts with: an allow-list of what programs need to
 * run (where to find them, locale, time zone, terminal), never the stack's own settings. The rest
 * an agent gets is the `LANES_*` card variables, the lane's `env`, and the `secrets` it maps.
 * LANES_TEST_RUN_ID is the test harness's mark on every process one run starts (no secret): it lets
 * the run's leak check find sandboxes it started and leave everyone else's alone.
 */
const AGENT_BASE_ENV = /^(PATH|HOME|USER|LOGNAME|SHELL|LANG|LANGUAGE|LC_[A-Z]+|TZ|TERM|TMPDIR|LANES_TEST_RUN_ID)$/;

export function agentBaseEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => AGENT_BASE_ENV.test(e[0]) && e[1] !== undefined));
}
