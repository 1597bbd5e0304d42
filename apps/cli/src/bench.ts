import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_DIR } from './paths.js';

const BENCHES: Record<string, string> = {
  sandbox: 'bench/sandbox-exec.ts',
  respawn: 'bench/respawn.ts',
  throughput: 'bench/throughput.ts',
  enqueue: 'bench/enqueue.ts',
  scale: 'bench/scale.ts',
  memory: 'bench/memory.ts',
  list: 'bench/card-list.ts',
  retention: 'bench/retention-memory.ts',
  'first-instruction': 'bench/first-instruction.ts',
  burst: 'bench/burst.ts',
  fleet: 'bench/fleet-cost.ts',
};

/** What `lanes bench NAME` runs; the usage text and the READMEs name the same list (bench-args.test.ts). */
export const BENCH_NAMES: readonly string[] = Object.keys(BENCHES);

/**
 * Runs each benchmark script in its own process (so timings are not disturbed by this one) and
 * streams its table. `args` (what followed `--` on the command line) go to the script as they are.
 */
export async function runBenchmarks(which: string, print: (s: string) => void, args: readonly string[] = [], benches: Readonly<Record<string, string>> = BENCHES): Promise<number> {
  if (which === 'all' && args.length > 0) {
    print('options after -- go to one benchmark: name it (lanes bench NAME -- OPTIONS)');
    return 2;
  }
  const names = which === 'all' ? Object.keys(benches) : [which];
  for (const name of names) {
    const rel = benches[name];
    if (!rel || !existsSync(join(PROJECT_DIR, rel))) {
      print(`no benchmark "${name}" (have: ${Object.keys(benches).join(', ')})`);
      return 2;
    }
    print(`\n== ${name}: npx tsx --conditions=@lanes/source ${[rel, ...args].join(' ')}`);
    const code = await new Promise<number>((resolve) => {
      const child = spawn(process.execPath, ['--conditions=@lanes/source', '--import', 'tsx', join(PROJECT_DIR, rel), ...args], { cwd: PROJECT_DIR, stdio: 'inherit' });
      child.once('exit', (c) => resolve(c ?? 1));
    });
    if (code !== 0) return code;
  }
  return 0;
}
