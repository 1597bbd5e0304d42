import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowRule, type CallbackAllowRule } from '@lanes/contracts';
import { postTo, resolveCallbackTarget, systemLookup, type CallbackLookup } from '../src/callback-target.js';

const rule = (text: string): CallbackAllowRule => {
  const r = parseAllowRule(text);
  if ('error' in r) throw new Error(r.error);
  return r;
};

describe('resolveCallbackTarget and postTo (real DNS for localhost, a real board on 127.0.0.1)', () => {
  let board: Server;
  let port = 0;
  const received: Array<{ host: string | undefined; body: string }> = [];

  beforeAll(async () => {
    board = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ host: req.headers.host, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => board.listen(0, '127.0.0.1', r));
    port = (board.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((r) => board.close(r));
  });

  it("the system resolver's localhost is loopback: refused without an allow rule", async () => {
    const target = await resolveCallbackTarget(new URL(`http://localhost:${port}/cb`), [], systemLookup);
    expect(target).toMatchObject({ action: 'refuse' });
  });

  it('a name that cannot be resolved is unresolved, not delivered', async () => {
    const failing: CallbackLookup = async () => {
      throw new Error('ENOTFOUND');
    };
    expect(await resolveCallbackTarget(new URL('http://board.invalid/cb'), [], failing)).toMatchObject({ action: 'unresolved' });
    expect(await resolveCallbackTarget(new URL('http://board.invalid/cb'), [], async () => [])).toMatchObject({ action: 'unresolved' });
  });

  it('an allowed name is delivered to the address that was checked, whatever the name resolves to at connect', async () => {
    const lookup: CallbackLookup = async () => [{ address: '127.0.0.1', family: 4 }];
    const url = new URL(`http://board.example.test:${port}/cb`);
    const target = await resolveCallbackTarget(url, [rule('127.0.0.1/32')], lookup);
    expect(target).toEqual({ action: 'deliver', address: '127.0.0.1', family: 4 });
    if (target.action !== 'deliver') return;
    // board.example.test exists in no DNS: only the pinned address can have carried this POST.
    const answer = await postTo(url, target, '{"event":"card.done"}', { 'content-type': 'application/json' }, 5_000);
    expect(answer).toEqual({ status: 204 });
    expect(received.at(-1)).toEqual({ host: `board.example.test:${port}`, body: '{"event":"card.done"}' });
  });

  it('a connection that fails is an error, not a status', async () => {
    const answer = await postTo(new URL('http://127.0.0.1:1/cb'), { address: '127.0.0.1', family: 4 }, '{}', {}, 5_000);
    expect(answer.error).toBeTruthy();
    expect(answer.status).toBeUndefined();
  });
});
