// Child-process helper for the owner-death test: creates one local sandbox, starts a long command in
// it (with a child that escapes into its own session), prints {id, pid} as a JSON line, then idles
// until it is SIGKILLed — a worker dying mid-card. Run with: node --import tsx --conditions=@lanes/source create-and-wait.ts <baseDir> <isolation> <worker> <marker>
import { LocalSandboxProvider, type IsolationMode } from '@lanes/sandbox';

const [baseDir, isolation, worker, marker] = process.argv.slice(2);
if (!baseDir || !isolation || !worker || !marker) throw new Error('usage: create-and-wait <baseDir> <isolation> <worker> <marker>');
const provider = new LocalSandboxProvider({ baseDir, isolation: isolation as IsolationMode });
const handle = await provider.create({ image: 'local', tags: { lane: 'reap', slot: 'slot-1', worker } });
let output = '';
await new Promise<void>((resolve) => {
  void handle.exec(['sh', '-c', 'setsid sleep 30 & echo started; exec sleep 30'], {
    env: { CONTRACT_TREE: marker },
    onOutput: (_stream, chunk) => {
      output += chunk;
      if (output.includes('started')) resolve();
    },
  });
});
process.stdout.write(`${JSON.stringify({ id: handle.id, pid: handle.pid })}\n`);
setInterval(() => {}, 60_000);
