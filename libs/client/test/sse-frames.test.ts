import { describe, expect, it } from 'vitest';
import { SseFrameParser, type SseFrame } from '@lanes/client';

describe('SseFrameParser', () => {
  it.each<[string, string[], SseFrame[]]>([
    ['one frame in one chunk', ['id: 1-0\nevent: card.done\ndata: {"a":1}\n\n'], [{ id: '1-0', event: 'card.done', data: '{"a":1}' }]],
    ['a frame split mid-line across chunks', ['id: 1-0\nda', 'ta: {"a"', ':1}\n', '\n'], [{ id: '1-0', data: '{"a":1}' }]],
    ['comments and keepalives dropped', [': lanes events\n\n: keepalive\n\n'], []],
    ['an id-only frame kept (it moves the resume point)', [': lanes events\nid: 5-0\n\n'], [{ id: '5-0' }]],
    ['multi-line data joined with newlines', ['data: a\ndata: b\n\n'], [{ data: 'a\nb' }]],
    ['CRLF line ends', ['id: 2-0\r\ndata: x\r\n\r\n'], [{ id: '2-0', data: 'x' }]],
    ['no space after the colon', ['id:3-0\ndata:y\n\n'], [{ id: '3-0', data: 'y' }]],
    ['two frames in one chunk, a third unfinished', ['data: 1\n\ndata: 2\n\ndata: 3\n'], [{ data: '1' }, { data: '2' }]],
  ])('%s', (_name, chunks, expected) => {
    const parser = new SseFrameParser();
    expect(chunks.flatMap((c) => parser.push(c))).toEqual(expected);
  });
});
