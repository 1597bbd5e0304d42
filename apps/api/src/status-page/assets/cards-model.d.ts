// Types for cards-model.js, which the browser loads as it is (no build step); the tests import it through these.
import type { CardRecord, CardSummary, HistoryEntry } from '@lanes/contracts';
import type { Frame } from './status-model.js';

export const CARDS_RUNNING_LISTED: number;
export const CARDS_RECENT_LISTED: number;
export const OUTPUT_LINES_KEPT: number;
export const OUTPUT_LINE_CHARS: number;
export const HISTORY_ENTRIES_SHOWN: number;
export const RESULT_CHARS_SHOWN: number;
export const CARDS_REFRESH_MIN_INTERVAL_MS: number;

export function isTerminalState(state: string): boolean;
export function cardListPaths(lane: string): { running: string; recent: string };
export function mergeCardLists(running: CardSummary[] | undefined, recent: CardSummary[] | undefined): CardSummary[];
export function isCardEvent(e: { type: string; cardId?: string }): boolean;
export function ageText(sinceIso: string, nowMs: number): string;
export function cardStateText(card: Pick<CardSummary, 'state' | 'blockedReason' | 'failedReason' | 'stateDetail'>): string;
export function historyEntryText(h: HistoryEntry): string;
export function historyShown(card: Pick<CardRecord, 'history' | 'historyDropped'>): { entries: HistoryEntry[]; hidden: number };
export function resultText(result: unknown): string | undefined;
export function keepLastLines(kept: string[], more: string[]): string[];
export function tailLines(outputTail: string | undefined): string[];
export function outputLinesOf(frame: Frame): string[];
