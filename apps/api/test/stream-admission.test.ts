import { describe, expect, it } from 'vitest';
import { wouldOverflow } from '../src/sse/sse-stream.js';
import { evaluateStreamAdmission, type StreamCapsConfig } from '../src/sse/stream-admission.js';

const CAPS: StreamCapsConfig = { maxStreamsPerPrincipal: 20, maxStreamsTotal: 200 };

describe('evaluateStreamAdmission', () => {
  it.each([
    [{ total: 0, ofPrincipal: 0 }, { action: 'admit' }],
    [{ total: 199, ofPrincipal: 19 }, { action: 'admit' }],
    [
      { total: 100, ofPrincipal: 20 },
      { action: 'refuse', reason: 'principal-cap', limit: 20 },
    ],
    [
      { total: 100, ofPrincipal: 21 },
      { action: 'refuse', reason: 'principal-cap', limit: 20 },
    ],
    [
      { total: 200, ofPrincipal: 0 },
      { action: 'refuse', reason: 'total-cap', limit: 200 },
    ],
    [
      { total: 201, ofPrincipal: 3 },
      { action: 'refuse', reason: 'total-cap', limit: 200 },
    ],
    // Both full: the principal hears about its own share first.
    [
      { total: 200, ofPrincipal: 20 },
      { action: 'refuse', reason: 'principal-cap', limit: 20 },
    ],
  ])('%j → %j', (snapshot, expected) => {
    expect(evaluateStreamAdmission(snapshot, CAPS)).toEqual(expected);
  });
});

describe('wouldOverflow', () => {
  const CAP = 1_000;
  it.each([
    [0, 10, false],
    [0, 5_000, false], // an empty buffer takes any one frame, however large
    [990, 10, false], // exactly at the cap
    [990, 11, true], // one byte past
    [1, 999, false],
    [1, 1_000, true],
    [1_500, 1, true],
  ])('buffered %i + frame %i → %s', (buffered, frame, overflow) => {
    expect(wouldOverflow(buffered, frame, CAP)).toBe(overflow);
  });
});
