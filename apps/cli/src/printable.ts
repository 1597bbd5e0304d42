/**
 * Text from boards and agents (titles, history messages, results, event data, output lines)
 * reaches the operator's terminal through the CLI. A control character in it would be obeyed, not
 * shown: OSC 52 writes the clipboard, CSI moves the cursor and can rewrite a line already printed,
 * a bidi override reverses what follows. Each is printed as a visible escape (`\x1b`, `\u202e`)
 * instead, so a table stays a table and nothing is hidden from the person reading it.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
/** SGR (colour, bold, reset): it changes how text looks, never where it goes; kept in output, as `less -R` keeps it. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: ESC opens the sequence it keeps
const SGR = /(\u001b\[[0-9;:]*m)/;

function escaped(c: string): string {
  const code = c.codePointAt(0)!;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** A table cell or an event line: every control character escaped, tabs and newlines too. */
export function printable(text: string): string {
  return text.replace(UNSAFE, escaped);
}

/** An agent's output line: the same, but its tabs and SGR colour sequences are printed as they are. */
export function printableOutput(line: string): string {
  // split() with a capture group: the odd parts are the SGR sequences themselves.
  return (
    line
      .split(SGR)
      // An output line keeps its own indentation: its tabs stay.
      .map((part, i) => (i % 2 === 1 ? part : part.replace(UNSAFE, (c) => (c === '\t' ? c : escaped(c)))))
      .join('')
  );
}
