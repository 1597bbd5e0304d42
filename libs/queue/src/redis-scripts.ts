import type { Redis } from 'ioredis';

/** One Lua command as ioredis defines it; without `numberOfKeys`, callers pass numkeys first. */
export interface ScriptSpec {
  numberOfKeys?: number;
  lua: string;
}

/** A module's Lua commands by name, defined together. */
export type ScriptTable = Readonly<Record<string, ScriptSpec>>;

// Keyed on the table's identity: defining is idempotent, but each definition hashes the script
// again, and the card path calls this once per write.
const definedTables = new WeakMap<Redis, WeakSet<ScriptTable>>();

/** Defines the table's commands on this connection unless it already has them. */
export function defineScriptsOnce(redis: Redis, table: ScriptTable): void {
  let tables = definedTables.get(redis);
  if (tables === undefined) {
    tables = new WeakSet();
    definedTables.set(redis, tables);
  }
  if (tables.has(table)) return;
  tables.add(table);
  for (const [name, spec] of Object.entries(table)) redis.defineCommand(name, spec);
}
