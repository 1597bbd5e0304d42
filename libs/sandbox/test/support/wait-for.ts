// One wait-with-deadline for every suite: the harness's.
export { waitFor } from '../../../../test/harness/wait-for.js';

/** Resolves once `text` has appeared in a command's live output; pass `onOutput` to the exec. */
export function outputWatcher(text: string): { onOutput: (stream: string, chunk: string) => void; seen: Promise<void> } {
  let buffer = '';
  let resolveSeen: () => void = () => {};
  const seen = new Promise<void>((resolve) => {
    resolveSeen = resolve;
  });
  return {
    onOutput: (_stream, chunk) => {
      buffer += chunk;
      if (buffer.includes(text)) resolveSeen();
    },
    seen,
  };
}
