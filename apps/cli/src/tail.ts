import { agentLimits, defaults, isTerminalCardState, type EventGap, type EventType } from '@lanes/contracts';
import type { LanesClient, StreamedEvent } from '@lanes/client';
import { statusCommand } from './commands.js';
import { printable, printableOutput } from './printable.js';

type Print = (s: string) => void;

const MIB = 1024 * 1024;

/** One event as a line a person reads: time, lane, event, then whatever it is about. */
export function formatEvent(e: StreamedEvent): string {
  const about = [
    e.cardId ? `card=${e.cardId}` : undefined,
    e.slot ? `slot=${e.slot}` : undefined,
    e.sandboxId ? `sandbox=${e.sandboxId}` : undefined,
    ...Object.entries(e.data ?? {}).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`),
  ].filter((s) => s !== undefined);
  return printable(`${e.at}  ${e.lane}  ${e.type.padEnd(17)} ${about.join(' ')}`.trimEnd());
}

/** What `lanes tail` says on stderr when the API could not replay every event after the resume point. */
export function gapNote(gap: EventGap): string {
  return `events after ${gap.after} may be missing: the stream had trimmed them (it keeps about ${defaults.EVENT_STREAM_MAX_LEN.toLocaleString('en-US')}) before they could be replayed; going on from ${gap.oldest}. \`lanes cards\` shows where cards are now`;
}

export interface TailOptions {
  lane?: string;
  cardId?: string;
  signal: AbortSignal;
  /** Where "reconnecting" notes go (stderr), so stdout stays one line per event. */
  note: Print;
}

/** `lanes tail`: follows events until interrupted, re-opening the stream after a disconnect. */
export async function tailCommand(client: LanesClient, options: TailOptions, print: Print): Promise<number> {
  let opens = 0;
  let dropped = false;
  for await (const e of client.events({
    ...(options.lane ? { lane: options.lane } : {}),
    ...(options.cardId ? { cardId: options.cardId } : {}),
    signal: options.signal,
    onOpen: (after) => {
      if (opens++ === 0) options.note(`following events${options.lane ? ` of lane ${options.lane}` : ''}${options.cardId ? ` of card ${options.cardId}` : ''} (Ctrl-C to stop)`);
      else options.note(`reconnected, resuming after ${after ?? 'now'}`);
      dropped = false;
    },
    onReconnect: (reason) => {
      if (!dropped) options.note(`disconnected (${reason instanceof Error ? reason.message : String(reason)}); reconnecting`);
      dropped = true;
    },
    onGap: (gap) => options.note(gapNote(gap)),
  })) {
    print(formatEvent(e));
  }
  return 0;
}

/** What `lanes tail --card` says on stderr when lines were trimmed before they could be sent. */
export function outputGapNote(gap: EventGap): string {
  const kept = `the card keeps its last ${agentLimits.CARD_OUTPUT_MAX_BYTES / MIB} MiB of output`;
  if (gap.after === '0-0') return `its first lines are gone: ${kept}; starting at ${gap.oldest}`;
  return `lines after ${gap.after} are missing: ${kept}, and it printed more before they could be sent; going on from ${gap.oldest}`;
}

export interface TailOutputOptions {
  signal: AbortSignal;
  /** Where "reconnecting" notes go (stderr), so stdout holds only the card's output lines. */
  note: Print;
}

/**
 * `lanes tail --card ID`: the card's output lines as the agent prints them, from the oldest the API
 * still holds; exits 0 once the card has ended (130 when interrupted). A dropped connection resumes
 * after the last line printed, so none is missed or printed twice.
 */
export async function tailOutputCommand(client: LanesClient, id: string, options: TailOutputOptions, print: Print): Promise<number> {
  let opens = 0;
  let dropped = false;
  for await (const chunk of client.output(id, {
    signal: options.signal,
    onOpen: (after) => {
      if (opens++ === 0) options.note(`following the output of card ${id} until it ends (Ctrl-C to stop)`);
      else options.note(`reconnected, resuming after ${after ?? 'the start'}`);
      dropped = false;
    },
    onReconnect: (reason) => {
      if (!dropped) options.note(`disconnected (${reason instanceof Error ? reason.message : String(reason)}); reconnecting`);
      dropped = true;
    },
    onGap: (gap) => options.note(outputGapNote(gap)),
  })) {
    for (const line of chunk.lines) print(printableOutput(line));
  }
  return options.signal.aborted ? 130 : 0;
}

const CARD_ENDS: ReadonlySet<EventType> = new Set<EventType>(['card.done', 'card.failed', 'card.cancelled']);

/** `lanes status ID --watch`: the card's status, its events as they happen, and its status again once it has ended. */
export async function watchCommand(client: LanesClient, id: string, signal: AbortSignal, print: Print): Promise<number> {
  const card = await client.get(id);
  if (isTerminalCardState(card.state)) return statusCommand(client, id, print);
  print(`${id} is ${card.state}; following it until it ends (Ctrl-C to stop)`);
  const stop = new AbortController();
  const lookAgain = () =>
    void client.get(id).then(
      (c) => isTerminalCardState(c.state) && stop.abort(),
      () => undefined,
    );
  const onAbort = () => stop.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    for await (const e of client.events({
      cardId: id,
      signal: stop.signal,
      // The card may have ended between the first look and the stream opening: look again once it is open.
      onOpen: lookAgain,
      // The card's end may be among the events trimmed before the stream could replay them.
      onGap: lookAgain,
    })) {
      print(formatEvent(e));
      if (CARD_ENDS.has(e.type)) break;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  if (signal.aborted) return 130;
  print('');
  return statusCommand(client, id, print);
}
