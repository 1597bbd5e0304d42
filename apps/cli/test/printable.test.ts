import { describe, expect, it } from 'vitest';
import { printable, printableOutput } from '../src/printable.js';

describe('printable: board and agent text is shown, never obeyed', () => {
  it.each([
    ['plain text and Unicode letters', 'fix: café ✓', 'fix: café ✓', 'fix: café ✓'],
    ['an SGR colour', '\u001b[31mred\u001b[0m', '\\x1b[31mred\\x1b[0m', '\u001b[31mred\u001b[0m'],
    ['SGR with colons (truecolour)', '\u001b[38:2::1:2:3mx', '\\x1b[38:2::1:2:3mx', '\u001b[38:2::1:2:3mx'],
    ['a tab', 'a\tb', 'a\\x09b', 'a\tb'],
    ['a newline inside a cell', 'a\nb', 'a\\x0ab', 'a\\x0ab'],
    ['a carriage return (rewrites the line)', 'ok\rFAIL', 'ok\\x0dFAIL', 'ok\\x0dFAIL'],
    ['OSC 52 (writes the clipboard)', '\u001b]52;c;ZXZpbA==\u0007', '\\x1b]52;c;ZXZpbA==\\x07', '\\x1b]52;c;ZXZpbA==\\x07'],
    ['a cursor move', '\u001b[2A', '\\x1b[2A', '\\x1b[2A'],
    ['an SGR-looking sequence that is not one', '\u001b[31;1Hx', '\\x1b[31;1Hx', '\\x1b[31;1Hx'],
    ['C1 CSI', '\u009b2J', '\\x9b2J', '\\x9b2J'],
    ['DEL and NUL', 'a\u007fb\u0000', 'a\\x7fb\\x00', 'a\\x7fb\\x00'],
    ['a bidi override and isolate', '\u202eabc\u2066', '\\u202eabc\\u2066', '\\u202eabc\\u2066'],
  ])('%s', (_what, input, cell, output) => {
    expect(printable(input)).toBe(cell);
    expect(printableOutput(input)).toBe(output);
  });
});
