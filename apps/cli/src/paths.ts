import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (apps/cli/src → ../../..), where `.lanes/` keeps local state. */
export const PROJECT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const STATE_DIR = resolve(PROJECT_DIR, '.lanes');
export const DEMO_AGENT = resolve(PROJECT_DIR, 'apps/cli/demo/agent.mjs');
