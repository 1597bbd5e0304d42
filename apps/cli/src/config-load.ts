import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError, parseLanesConfig, type LanesConfig } from '@lanes/contracts';
import { DEMO_AGENT } from './paths.js';

export interface LoadedConfig {
  config: LanesConfig;
  /** Where relative `files[].from` paths resolve. */
  baseDir: string;
  source: string;
}

/** With no file, a demo lane whose agent commits to a local git repository. */
export function demoConfig(): LanesConfig {
  return parseLanesConfig({
    lanes: [{ name: 'demo', provider: 'local', slots: 2, minSlots: 1, maxSlots: 4, agent: [process.execPath, DEMO_AGENT], commandTimeoutMs: 120_000 }],
  });
}

/** `--config FILE`, else LANES_CONFIG, else the demo lane. Invalid config throws ConfigError naming the key. */
export function loadConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const path = file ?? env.LANES_CONFIG;
  if (!path) return { config: demoConfig(), baseDir: process.cwd(), source: 'demo lane (no --config)' };
  const abs = resolve(path);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(abs, 'utf8'));
  } catch (err) {
    throw new ConfigError([{ path: '', message: `cannot read ${abs}: ${err instanceof Error ? err.message : String(err)}` }], abs);
  }
  return { config: parseLanesConfig(raw, abs), baseDir: dirname(abs), source: abs };
}
