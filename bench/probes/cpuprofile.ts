/** What bench/probes/cpuprofile-top.ts and bench/probes/cpuprofile-stalls.ts read: a V8 CPU profile (`node --cpu-prof`). */
import { readFileSync } from 'node:fs';

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export function loadProfile(file: string): Profile {
  return JSON.parse(readFileSync(file, 'utf8')) as Profile;
}

/** `function path:line`, the path cut to the package (node_modules) or to apps/, libs/, bench/, test/. */
export function frameLabel(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url ? `${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(apps|libs|bench|test)\//, '$1/')}:${lineNumber + 1}` : '';
  return `${functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
}
