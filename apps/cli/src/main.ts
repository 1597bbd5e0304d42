import { parseArgs } from 'node:util';
import { ConfigError, LanesError } from '@lanes/contracts';
import { LanesClient, LanesUnreachableError } from '@lanes/client';
import { cardAction, cardsCommand, enqueueCommand, lanesCommand, statusCommand } from './commands.js';
import { tailCommand, tailOutputCommand, watchCommand } from './tail.js';

const USAGE = `usage: lanes <command> [options]

  up [--config FILE] [--port N]     API + Bull Board + worker + supervisor in one process
  api | worker | supervisor [--config FILE]
                                    one part only (containers)
  enqueue --lane L --title T [--id ID] [--prompt P] [--repo URL] | --json FILE|-
  status CARD_ID [--watch]          a card's state and history; --watch follows it until it ends
  tail [--lane L]                   follow events as lines until Ctrl-C; resumes after a disconnect
  tail --card ID                    a card's output lines as they are printed; exits when the card ends
  cancel CARD_ID                    kill its process group (never the sandbox) or dequeue it
  unblock CARD_ID [--note TEXT]     release a needs-human card
  retry CARD_ID [--reason TEXT]     queue a failed or cancelled card again (history kept, attempts reset)
  cards [--lane L] [--state S] [--blocked-reason R] [--since ISO] [--limit N] [--cursor C | --all]
                                    cards as a table, newest update first; a page (50) or --all
  lanes                             lanes, slots, sandboxes, breakers
  bench [NAME|all] [-- OPTIONS]     run benchmarks (sandbox, respawn, throughput, enqueue, scale, memory, list, retention,
                                    first-instruction, burst, fleet) and print figures;
                                    OPTIONS after -- go to the named benchmark (e.g. bench enqueue -- --rounds 5)

Remote commands use LANES_API_URL (default http://127.0.0.1:$LANES_PORT or :3000) and LANES_API_TOKEN.`;

/**
 * `signal` ends the following commands (tail, status --watch); by default it is Ctrl-C.
 * `note` takes what is said about the connection rather than printed as output (stderr).
 */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  print: (s: string) => void = (s) => process.stdout.write(`${s}\n`),
  signal?: AbortSignal,
  note: (s: string) => void = (s) => process.stderr.write(`lanes: ${s}\n`),
): Promise<number> {
  // Everything after `--` belongs to a benchmark script, not to lanes.
  const dashDash = argv.indexOf('--');
  const passThrough = dashDash >= 0 ? argv.slice(dashDash + 1) : [];
  const { values, positionals } = parseArgs({
    args: dashDash >= 0 ? argv.slice(0, dashDash) : argv,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      port: { type: 'string' },
      lane: { type: 'string' },
      title: { type: 'string' },
      id: { type: 'string' },
      prompt: { type: 'string' },
      repo: { type: 'string' },
      json: { type: 'string' },
      note: { type: 'string' },
      reason: { type: 'string' },
      state: { type: 'string' },
      'blocked-reason': { type: 'string' },
      since: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      all: { type: 'boolean' },
      url: { type: 'string' },
      card: { type: 'string' },
      watch: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, arg] = positionals;
  if (!command || values.help) {
    print(USAGE);
    return command ? 0 : 2;
  }
  const url = values.url ?? env.LANES_API_URL ?? `http://127.0.0.1:${env.LANES_PORT ?? 3000}`;
  const client = new LanesClient({
    url,
    ...(env.LANES_API_TOKEN || env.LANES_API_TOKENS ? { token: env.LANES_API_TOKEN ?? env.LANES_API_TOKENS!.split(',')[0]!.trim() } : {}),
  });
  const needId = () => {
    if (!arg) throw new UsageError(`${command} needs a card id`);
    return arg;
  };
  try {
    switch (command) {
      case 'up':
      case 'api':
      case 'worker':
      case 'supervisor': {
        const parts = command === 'up' ? undefined : { api: command === 'api', worker: command === 'worker', supervisor: command === 'supervisor' };
        // Loaded here, not at the top: the remote commands (status, cards, tail, …) talk to the API
        // alone, and start without loading the stack, its queues and the Modal SDK.
        const [{ up }, { createLogger }] = await Promise.all([import('./up.js'), import('./logger.js')]);
        return await up(
          { ...(values.config ? { config: values.config } : {}), ...(values.port ? { port: Number(values.port) } : {}), ...(parts ? { parts } : {}) },
          env,
          createLogger(env),
          print,
        );
      }
      case 'enqueue':
        return await enqueueCommand(client, values, print);
      case 'status':
        return values.watch ? await watchCommand(client, needId(), signal ?? interrupted(), print) : await statusCommand(client, needId(), print);
      case 'tail':
        if (values.card) return await tailOutputCommand(client, values.card, { signal: signal ?? interrupted(), note }, print);
        return await tailCommand(
          client,
          { ...(values.lane ? { lane: values.lane } : {}), ...(values.card ? { cardId: values.card } : {}), signal: signal ?? interrupted(), note },
          print,
        );
      case 'cancel':
      case 'unblock':
        return await cardAction(client, command, needId(), values.note, print);
      case 'retry':
        return await cardAction(client, 'retry', needId(), values.reason, print);
      case 'cards':
        return await cardsCommand(client, values, print);
      case 'lanes':
        return await lanesCommand(client, print);
      case 'bench': {
        const { runBenchmarks } = await import('./bench.js');
        return await runBenchmarks(arg ?? 'all', print, passThrough);
      }
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`lanes: ${err.message}\n\n${USAGE}\n`);
      return 2;
    }
    if (err instanceof LanesUnreachableError) {
      process.stderr.write(`lanes: cannot reach the API at ${url} (is \`lanes up\` running?)\n`);
      return 1;
    }
    if (err instanceof ConfigError || err instanceof LanesError) {
      process.stderr.write(`lanes: ${err.message}\n`);
      return 1;
    }
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      process.stderr.write(`lanes: ${(err as Error).message}: another process holds the port; set LANES_PORT or --port\n`);
      return 1;
    }
    throw err;
  }
}

class UsageError extends Error {}

/** Aborts on the first Ctrl-C, so a following command ends cleanly; only those commands listen (a listener stops Node's own exit on SIGINT). */
function interrupted(): AbortSignal {
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  return controller.signal;
}
