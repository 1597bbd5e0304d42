/** The text cut to `max` characters, marked as cut: agent text is capped before it reaches Redis, events or logs. */
export function capChars(text: string, max: number): string {
  if (text.length <= max) return text;
  const marker = ` … [${(text.length - max).toLocaleString('en-US')} more characters cut]`;
  return text.slice(0, Math.max(0, max - marker.length)) + marker;
}

/** The last non-empty line of `text`, capped; found from the end, so a huge output costs no split. */
export function lastLine(text: string, max: number): string {
  const trimmed = text.trimEnd();
  const line = trimmed.slice(trimmed.lastIndexOf('\n') + 1).trim();
  return capChars(line, max);
}
