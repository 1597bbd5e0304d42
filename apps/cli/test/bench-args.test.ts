import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BENCH_NAMES, PROJECT_DIR, main, runBenchmarks } from '@lanes/cli';

describe('lanes bench NAME -- OPTIONS', () => {
  let dir: string;
  let script: string;
  let seen: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lanes-bench-args-'));
    seen = join(dir, 'argv.json');
    script = join(dir, 'echo-args.mjs');
    // A real child process, started the way every benchmark is, that records the argv it got.
    await writeFile(script, `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(seen)}, JSON.stringify(process.argv.slice(2)));\n`);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('hands the options after -- to the benchmark script unchanged', async () => {
    const printed: string[] = [];
    const code = await runBenchmarks('echo', (s) => printed.push(s), ['--rounds', '5', '--clients', 'a b'], { echo: relative(PROJECT_DIR, script) });
    expect(code).toBe(0);
    expect(JSON.parse(await readFile(seen, 'utf8'))).toEqual(['--rounds', '5', '--clients', 'a b']);
    expect(printed.join('\n')).toContain('echo-args.mjs --rounds 5');
  });

  it('refuses options for "all", and the command line routes what follows -- to the benchmark', async () => {
    const printed: string[] = [];
    // Without the routing, `--rounds 1` would be dropped and every benchmark would start.
    expect(await main(['bench', 'all', '--', '--rounds', '1'], {}, (s) => printed.push(s))).toBe(2);
    expect(printed.join('\n')).toContain('name it (lanes bench NAME -- OPTIONS)');
  });

  it('names the benchmarks it has when asked for one it does not', async () => {
    const printed: string[] = [];
    expect(await main(['bench', 'nosuch', '--', '--rounds', '1'], {}, (s) => printed.push(s))).toBe(2);
    expect(printed.join('\n')).toContain('no benchmark "nosuch" (have: sandbox, respawn, throughput, enqueue, scale, memory, list, retention, first-instruction, burst, fleet)');
  });

  it('is described with every benchmark it runs: its usage, the README synopsis and bench/README', async () => {
    const usage: string[] = [];
    await main(['--help'], {}, (s) => usage.push(s));
    const usageList = /run benchmarks \(([^)]*)\)/.exec(usage.join('\n').replace(/\s+/g, ' '))?.[1];
    expect(usageList?.split(', ')).toEqual(BENCH_NAMES);
    const synopsis = (file: string) => {
      const line = /lanes bench \[([a-z|-]+)\]/.exec(readFileSync(join(PROJECT_DIR, file), 'utf8'))?.[1];
      return line?.split('|').filter((name) => name !== 'all');
    };
    expect(synopsis('README.md')).toEqual(BENCH_NAMES);
    expect(synopsis('bench/README.md')).toEqual(BENCH_NAMES);
  });
});
