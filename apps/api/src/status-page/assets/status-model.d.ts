// Types for status-model.js, which the browser loads as it is (no build step); the tests import it through these.
import type { LaneEvent, LaneStatus, ObservedExitCode, SandboxRecord, SlotStatus } from '@lanes/contracts';

export const RECENT_EVENTS_WINDOW_MS: number;
export const MAX_VERDICTS: number;

export interface Frame {
  id?: string;
  event?: string;
  data?: string;
}
export interface Death {
  sandboxId?: string;
  observedExitCode: ObservedExitCode;
  reason?: string;
  at?: string;
}
export interface VerdictEntry {
  at: string;
  lane: string;
  slot?: string;
  cardId?: string;
  sandboxId?: string;
  type: string;
  verdict: string;
  observedExitCode?: ObservedExitCode;
  reason?: string;
}
export interface SandboxView {
  state: string;
  id?: string;
  pid?: number;
  observedExitCode?: ObservedExitCode;
  reason?: string;
}
export interface BlockedCard {
  id: string;
  blockedReason: string;
  since: string;
  title?: string;
  message?: string;
}
export interface BlockedList {
  lane: string;
  total: number;
  cards: BlockedCard[];
}
export interface StatusModel {
  lanes: LaneStatus[];
  deaths: Record<string, Death>;
  verdicts: VerdictEntry[];
  blocked: Record<string, BlockedList>;
}
/** An event as it arrives: a known lane event, or one of a type this page does not know yet. */
export type PageEvent = Omit<LaneEvent, 'type'> & { type: string };

export function recentStreamId(nowMs: number, windowMs?: number): string;
export function parseFrame(frame: string): Frame;
export function eventOf(frame: Frame): PageEvent | undefined;
export function verdictOf(e: PageEvent): VerdictEntry | undefined;
export function sandboxView(slot: SlotStatus, death?: Death): SandboxView;
export function countsOf(lane: Pick<LaneStatus, 'counts'>): { states: Array<[string, number]>; blocked: Array<[string, number]> };
export function emptyModel(): StatusModel;
export function applyEvent(model: StatusModel, e: PageEvent): { model: StatusModel; refresh: boolean };
export function withLanes(model: StatusModel, lanes: LaneStatus[]): StatusModel;
export function deathOf(model: StatusModel, lane: string, slot: string): Death | undefined;
export function withDeathRecord(model: StatusModel, record: SandboxRecord): StatusModel;
export function sandboxesToLookUp(model: StatusModel): string[];
export function exitCodeText(code: ObservedExitCode | undefined): string;
export function blockedByReason(cards: BlockedCard[] | undefined): Array<[string, BlockedCard[]]>;
export function lanesWithBlocked(model: StatusModel): string[];
export function withBlocked(model: StatusModel, lane: string, list: BlockedList | undefined): StatusModel;
