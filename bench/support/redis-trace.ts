/**
 * Part of the probes: hears every command any ioredis client in this process sends, with scripts
 * named as their `defineCommand` named them (by sha), and when each is answered. Patches ioredis's
 * prototype, so load it before the stack makes its clients; the probe's own client can be left out.
 * Used by probes/first-instruction-timeline.ts and probes/burst-chain.ts.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';

type Definable = { defineCommand: (name: string, def: { lua: string }) => void };
type Command = { name: string; args: unknown[]; promise: Promise<unknown> };
type Sendable = { sendCommand: (command: Command, stream?: unknown) => unknown };

/** `onCommand(name, args, answered)` for every command sent by a client other than `except`; `answered` settles with its reply. */
export function traceRedisCommands(onCommand: (name: string, args: unknown[], answered: Promise<unknown>) => void, except?: () => unknown): void {
  const scriptNames = new Map<string, string>();
  const define = (Redis.prototype as unknown as Definable).defineCommand;
  (Redis.prototype as unknown as Definable).defineCommand = function (this: Definable, name, def) {
    scriptNames.set(createHash('sha1').update(def.lua).digest('hex'), name);
    return define.call(this, name, def);
  };
  const sendCommand = (Redis.prototype as unknown as Sendable).sendCommand;
  (Redis.prototype as unknown as Sendable).sendCommand = function (this: Sendable, command, stream) {
    if (this !== except?.()) {
      const scripted = command.name === 'evalsha' || command.name === 'eval';
      onCommand(scripted ? (scriptNames.get(String(command.args[0])) ?? command.name) : command.name, command.args, command.promise);
    }
    return sendCommand.call(this, command, stream);
  };
}
