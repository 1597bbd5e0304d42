import { describe, expect, it } from 'vitest';
import { READY_BEATS, evaluateWorkerReadiness, type WorkerReadinessSnapshot } from '../src/index.js';

const NOW = 1_000_000;
const INTERVAL_MS = 500;
const WINDOW_MS = READY_BEATS * INTERVAL_MS;

describe('evaluateWorkerReadiness', () => {
  it.each<[string, WorkerReadinessSnapshot, boolean]>([
    ['starting', { phase: 'starting', lastBeatOkAt: NOW }, false],
    ['running, no beat yet', { phase: 'running' }, false],
    ['running, beat just now', { phase: 'running', lastBeatOkAt: NOW }, true],
    ['running, beat at the window edge', { phase: 'running', lastBeatOkAt: NOW - WINDOW_MS }, true],
    ['running, beat 1 ms past the window', { phase: 'running', lastBeatOkAt: NOW - WINDOW_MS - 1 }, false],
    ['stopping (draining)', { phase: 'stopping', lastBeatOkAt: NOW }, false],
    ['stopped', { phase: 'stopped', lastBeatOkAt: NOW }, false],
  ])('%s → ready %s', (_name, snapshot, ready) => {
    const r = evaluateWorkerReadiness(snapshot, { heartbeatIntervalMs: INTERVAL_MS }, NOW);
    expect(r.ready).toBe(ready);
    expect(r.reason).toBeTruthy();
  });
});
