import { describe, expect, it } from 'vitest';
import { gapNote, outputGapNote } from '../src/tail.js';

describe('what lanes tail says on stderr when a stream could not send everything', () => {
  it('an event gap names both ids, the window and where to look now', () => {
    const note = gapNote({ after: '1700000000000-3', oldest: '1700000000500-0' });
    expect(note).toContain('events after 1700000000000-3 may be missing');
    expect(note).toContain('about 10,000');
    expect(note).toContain('going on from 1700000000500-0');
    expect(note).toContain('lanes cards');
  });

  it('an output gap says the budget; from the start it says the first lines are gone', () => {
    expect(outputGapNote({ after: '5-0', oldest: '9-0' })).toBe(
      'lines after 5-0 are missing: the card keeps its last 1 MiB of output, and it printed more before they could be sent; going on from 9-0',
    );
    expect(outputGapNote({ after: '0-0', oldest: '9-0' })).toBe('its first lines are gone: the card keeps its last 1 MiB of output; starting at 9-0');
  });
});
