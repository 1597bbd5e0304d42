import { defaults } from '@lanes/contracts';

/** How many SSE streams one API process serves. */
export interface StreamCapsConfig {
  /** Streams one principal (a token) may hold open at once. Default 20. */
  maxStreamsPerPrincipal: number;
  /** Streams the process holds open at once, over every principal. Default 200. */
  maxStreamsTotal: number;
}

export const DEFAULT_STREAM_CAPS_CONFIG: StreamCapsConfig = {
  maxStreamsPerPrincipal: defaults.DEFAULT_SSE_MAX_STREAMS_PER_PRINCIPAL,
  maxStreamsTotal: defaults.DEFAULT_SSE_MAX_STREAMS_TOTAL,
};

/** The streams open when one more is asked for. */
export interface StreamCountSnapshot {
  total: number;
  ofPrincipal: number;
}

export type StreamAdmission = { action: 'admit' } | { action: 'refuse'; reason: 'principal-cap' | 'total-cap'; limit: number };

/**
 * Whether one more stream may open. The principal's own cap is checked first, so a token that holds
 * its share hears about its own share, not about the fleet.
 */
export function evaluateStreamAdmission(snapshot: StreamCountSnapshot, config: StreamCapsConfig): StreamAdmission {
  if (snapshot.ofPrincipal >= config.maxStreamsPerPrincipal) return { action: 'refuse', reason: 'principal-cap', limit: config.maxStreamsPerPrincipal };
  if (snapshot.total >= config.maxStreamsTotal) return { action: 'refuse', reason: 'total-cap', limit: config.maxStreamsTotal };
  return { action: 'admit' };
}
