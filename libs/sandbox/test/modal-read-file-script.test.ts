import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentFileError, ProviderInvalidError } from '@lanes/contracts';
import type { ExecResult } from '@lanes/sandbox';
import { readFileArgv } from '../src/modal/modal-exec-scripts.js';
import { parseFileRead, readFileOutputChars } from '../src/modal/modal-read-file.js';

// READ_FILE_SCRIPT run by the host's sh (dash on Debian, as in debian:bookworm-slim), and the
// parser of its answer: the pure half of ModalSandboxHandle.readFile.

const CAP = 100;
let root: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'lanes-read-file-'));
  mkdirSync(join(root, 'out'));
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

function run(relative: string, maxBytes = CAP, timeoutMs = 5_000): ExecResult {
  const [, ...args] = readFileArgv(root, relative, maxBytes);
  const r = spawnSync('sh', args, { encoding: 'utf8', timeout: timeoutMs });
  return { exitCode: r.status ?? -1, stdout: r.stdout, stderr: r.stderr, timedOut: r.error !== undefined, cancelled: false, durationMs: 0 };
}

function read(relative: string, maxBytes = CAP): Uint8Array | undefined {
  return parseFileRead(relative.split('/').at(-1) ?? '', run(relative, maxBytes), maxBytes, readFileOutputChars(relative, maxBytes));
}

function refusal(relative: string, maxBytes = CAP): [string, string] {
  try {
    read(relative, maxBytes);
  } catch (e) {
    if (e instanceof AgentFileError) return [e.rule, e.message];
    throw e;
  }
  throw new Error(`${relative} was read`);
}

const result = (over: Partial<ExecResult>): ExecResult => ({ exitCode: 0, stdout: '', stderr: '', timedOut: false, cancelled: false, durationMs: 1, ...over });

describe('READ_FILE_SCRIPT in a real shell', () => {
  it('reads a regular file whole and binary-safe (bytes 0..255), an empty one as empty, one of exactly the cap', () => {
    const binary = new Uint8Array(256).map((_, i) => i);
    writeFileSync(join(root, 'out/bytes.bin'), binary);
    writeFileSync(join(root, 'out/empty'), '');
    writeFileSync(join(root, 'out/at'), 'x'.repeat(CAP));
    expect(read('out/bytes.bin', 256)).toEqual(binary);
    expect(read('out/empty')).toEqual(new Uint8Array(0));
    expect(read('out/at')?.byteLength).toBe(CAP);
  });

  it('answers missing for a missing file or directory on the way', () => {
    expect(read('out/nope.json')).toBeUndefined();
    expect(read('nope/result.json')).toBeUndefined();
  });

  it('refuses a link on any component, a FIFO, a directory, a file over the cap; sends nothing of a file over it', () => {
    mkdirSync(join(root, 'elsewhere'));
    writeFileSync(join(root, 'elsewhere/result.json'), '{}');
    symlinkSync(join(root, 'elsewhere'), join(root, 'via'));
    symlinkSync('/dev/zero', join(root, 'out/zero.json'));
    spawnSync('mkfifo', [join(root, 'out/fifo.json')]);
    writeFileSync(join(root, 'out/big.json'), 'x'.repeat(CAP + 1));
    expect(refusal('via/result.json')).toEqual(['link', 'result.json is under via, which is a symbolic link; lanes reads no file through a link']);
    expect(refusal('out/zero.json')).toEqual(['link', 'zero.json is a symbolic link; lanes reads no file through a link']);
    expect(refusal('out/fifo.json')).toEqual(['not-regular', 'fifo.json is a FIFO, not a regular file']);
    expect(refusal('out')).toEqual(['not-regular', 'out is a directory, not a regular file']);
    expect(refusal('out/big.json')).toEqual(['too-large', 'big.json is 101 bytes (limit 100 bytes)']);
    expect(run('out/big.json').stdout).toBe('size 101\n');
  });

  it('sends at most cap + 1 bytes of the file, in base64 on one line, so its answer fits readFileOutputChars', () => {
    writeFileSync(join(root, 'out/result.json'), 'y'.repeat(CAP));
    const answer = run('out/result.json').stdout;
    expect(answer).toBe(`size ${CAP}\n${Buffer.from('y'.repeat(CAP)).toString('base64')}`);
    expect(answer.length).toBeLessThanOrEqual(readFileOutputChars('out/result.json', CAP));
  });

  it('while a daemon swaps result.json between the file, a link to /dev/zero, a link to another file and a FIFO, every read is the file, a refusal or a blocked open, and never more than the bound', async () => {
    writeFileSync(join(root, 'out/linked.txt'), 'LINKED');
    const original = '{"ok":true}\n';
    const swapper = spawn(
      'sh',
      [
        '-c',
        `cd "$1" && while :; do
          printf '%s' '${original}' > t1 && mv -f t1 result.json
          ln -s /dev/zero t2 && mv -f t2 result.json
          printf '%s' '${original}' > t3 && mv -f t3 result.json
          ln -s linked.txt t4 && mv -f t4 result.json
          mkfifo t5 && mv -f t5 result.json
        done`,
        'swapper',
        join(root, 'out'),
      ],
      // Its own process group: the kill below takes its mv/ln/mkfifo too, which would write on while the directory is removed.
      { stdio: 'ignore', detached: true },
    );
    const swapperExited = new Promise((r) => swapper.once('exit', r));
    const seen = new Map<string, number>();
    try {
      // Without the checks after the open, about 1 read in 25 here returned linked.txt's content.
      for (let i = 0; i < 150; i++) {
        const answer = run('out/result.json', CAP, 300);
        expect(answer.stdout.length).toBeLessThanOrEqual(readFileOutputChars('out/result.json', CAP));
        let outcome: string;
        try {
          const bytes = parseFileRead('result.json', answer, CAP, readFileOutputChars('out/result.json', CAP));
          outcome = bytes === undefined ? 'missing' : new TextDecoder().decode(bytes);
        } catch (e) {
          outcome = e instanceof AgentFileError ? e.message : String(e);
        }
        seen.set(outcome, (seen.get(outcome) ?? 0) + 1);
      }
    } finally {
      process.kill(-swapper.pid!, 'SIGKILL');
      await swapperExited;
    }
    const allowed = new Set([
      original,
      // mv may remove the old name before the new one lands.
      'missing',
      'result.json is a symbolic link; lanes reads no file through a link',
      'result.json was replaced while lanes opened it; lanes reads no file through a link',
      'result.json is a FIFO, not a regular file',
      'result.json is a character device, not a regular file',
      // Swapped between kind's tests (each its own stat), so none of them matched.
      'result.json is changing or of no known type, not a regular file',
      // The open of a FIFO blocks; in a sandbox the command's deadline ends it.
      'result.json could not be read within the file deadline',
    ]);
    expect(seen.has('LINKED')).toBe(false);
    expect([...seen.keys()].filter((o) => !allowed.has(o))).toEqual([]);
  });
});

describe('parseFileRead', () => {
  const chars = readFileOutputChars('out/result.json', CAP);
  it.each([
    ['missing', result({ stdout: 'missing\n' }), 'undefined'],
    ['a link', result({ stdout: 'link result.json\n' }), 'link: result.json is a symbolic link; lanes reads no file through a link'],
    ['a link above', result({ stdout: 'link out\n' }), 'link: result.json is under out, which is a symbolic link; lanes reads no file through a link'],
    ['replaced at the open', result({ stdout: 'changed\n' }), 'link: result.json was replaced while lanes opened it; lanes reads no file through a link'],
    ['a FIFO', result({ stdout: 'type a FIFO\n' }), 'not-regular: result.json is a FIFO, not a regular file'],
    ['unopenable', result({ stdout: 'unreadable\n' }), 'not-regular: result.json cannot be opened for reading'],
    ['the deadline', result({ timedOut: true, exitCode: 130 }), 'not-regular: result.json could not be read within the file deadline'],
    ['over the cap', result({ stdout: 'size 101\n' }), 'too-large: result.json is 101 bytes (limit 100 bytes)'],
    ['grown past it', result({ stdout: `size 5\n${Buffer.alloc(CAP + 1).toString('base64')}` }), 'too-large: result.json grew past 101 bytes (limit 100 bytes)'],
    [
      'longer than the bound',
      result({ stdout: 'A'.repeat(chars + 1) }),
      'too-large: result.json was read back longer than 100 bytes can be (limit 100 bytes): a tool in the sandbox ignored the cap',
    ],
    ['a file', result({ stdout: `size 2\n${Buffer.from('{}').toString('base64')}` }), 'bytes: {}'],
    ['an empty file', result({ stdout: 'size 0\n' }), 'bytes: '],
  ])('%s', (_name, answer, expected) => {
    let got: string;
    try {
      const bytes = parseFileRead('result.json', answer, CAP, chars);
      got = bytes === undefined ? 'undefined' : `bytes: ${new TextDecoder().decode(bytes)}`;
    } catch (e) {
      got = e instanceof AgentFileError ? `${e.rule}: ${e.message}` : String(e);
    }
    expect(got).toBe(expected);
  });

  it.each([
    ['a failed command', result({ exitCode: 127, stderr: 'lanes: base64 is missing from the sandbox image\n' }), 'exited 127: lanes: base64 is missing from the sandbox image'],
    ['an unknown verdict', result({ stdout: 'what\n' }), 'answered "what\\n"'],
    ['a size that is no number', result({ stdout: 'size x\n' }), 'answered "size x\\n"'],
    ['a size line without its end', result({ stdout: 'size 2' }), 'answered "size 2"'],
    ['a body that is not base64', result({ stdout: 'size 2\ne30*' }), 'answered 4 characters that are not base64'],
  ])('%s is the provider’s trouble, not the agent’s', (_name, answer, message) => {
    const error = (() => {
      try {
        parseFileRead('result.json', answer, CAP, chars);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ProviderInvalidError);
    expect((error as Error).message).toContain(message);
  });
});
