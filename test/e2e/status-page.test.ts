import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { detectIsolation } from '@lanes/sandbox';
import { apiClient, startRedis, startTestStack, type TestRedis, type TestStack } from '../harness/index.js';
import { launchChromium, PAGE_WAIT_MS, SCREENSHOT_DIR, skipWithoutChromium } from './status-page-browser.js';

const TOKEN = 'tok-status-page';

// The few browser globals the in-page code touches: the project compiles without the DOM lib.
declare const window: { seen: Record<string, string[]>; seenDead: string[] };
declare const document: { body: unknown; querySelector(selector: string): { getAttribute(name: string): string | null; textContent: string | null } | null };
declare const MutationObserver: new (callback: () => void) => { observe(target: unknown, options: object): void };

describe.skipIf(skipWithoutChromium)('the status page in headless chromium', () => {
  let redis: TestRedis;
  let t: TestStack;
  let browser: Browser | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'watched', slots: 1, agent: [process.execPath, DEMO_AGENT], respawn: { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 } }], {
      tokens: [TOKEN],
    });
    browser = await launchChromium();
  });

  afterAll(async () => {
    // Each step on its own, so a failure in one still closes the others (the browser above all).
    await browser?.close().catch(() => undefined);
    await t?.stop().catch(() => undefined);
    await redis?.stop();
  });

  it('is refused without the token, with a Basic challenge for the browser', async () => {
    const open = apiClient(t.stack.url!);
    const page = await open.request('GET', '/');
    expect(page.status).toBe(401);
    expect(page.headers.get('www-authenticate')).toMatch(/^Basic\b/);
    expect((await open.request('GET', '/status-page/status.js')).status).toBe(401);
    const authed = apiClient(t.stack.url!, TOKEN);
    const html = await authed.request('GET', '/');
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toMatch(/^text\/html/);
    expect(html.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect((await authed.request('GET', '/status-page/status-model.js')).headers.get('content-type')).toMatch(/^text\/javascript/);
    expect((await authed.request('GET', '/status-page/..%2Fstatus-page.ts')).status).toBe(404);
  });

  it('shows a killed sandbox dead with its exit code, then a new live sandbox, without a reload', async () => {
    const context = await browser!.newContext({ httpCredentials: { username: 'operator', password: TOKEN }, viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    try {
      await page.goto(`${t.stack.url}/`);
      const row = page.locator('tr.slot[data-slot^="watched/"]').first();
      await row.and(page.locator('[data-state="live"]')).waitFor({ timeout: PAGE_WAIT_MS });
      await page.locator('#stream[data-state="live"]').waitFor({ timeout: PAGE_WAIT_MS });
      const first = (await row.getAttribute('data-sandbox-id'))!;
      const slotName = (await row.getAttribute('data-slot'))!;
      await recordStates(page, slotName);

      const api = apiClient(t.stack.url!, TOKEN);
      await api.request('POST', '/v1/cards', { id: 'sp-1', lane: 'watched', title: 'watched card', metadata: { sleepMs: 3_000 } });
      await page.locator(`tr.slot[data-slot="${slotName}"] td.card`, { hasText: 'sp-1' }).waitFor({ timeout: PAGE_WAIT_MS });
      const slot = (await api.lanes())[0]!.slots.find((s) => s.cardId === 'sp-1')!;
      expect(slot.sandbox?.id).toBe(first);
      process.kill(slot.sandbox!.pid!, 'SIGKILL');

      // Dead, with the exit code the supervisor observed (SIGKILL: 137)...
      await page.waitForFunction((name) => window.seen[name]?.includes('dead'), slotName, { timeout: PAGE_WAIT_MS });
      const deadSeen = await page.evaluate(() => window.seenDead);
      expect(deadSeen.some((text) => text.includes(first) && text.includes('exit 137'))).toBe(true);
      // ...then live again on a sandbox with a new id.
      const replaced = page.locator(`tr.slot[data-slot="${slotName}"][data-state="live"]:not([data-sandbox-id="${first}"])`);
      await replaced.waitFor({ timeout: PAGE_WAIT_MS });
      const second = (await replaced.getAttribute('data-sandbox-id'))!;
      expect(second).not.toBe(first);
      expect(second).not.toBe('');
      const states = await page.evaluate((name) => window.seen[name]!, slotName);
      expect(states.indexOf('dead')).toBeLessThan(states.lastIndexOf('live'));
      await expect.poll(() => replaced.locator('.last-death').textContent(), { timeout: PAGE_WAIT_MS }).toContain(`${first} exit 137`);

      // The verdicts list names the death, and the card's run ends done on the replacement.
      await page.locator('#verdicts li[data-verdict="sandbox-dead"]', { hasText: 'exit 137' }).first().waitFor({ timeout: PAGE_WAIT_MS });
      await page.locator('#verdicts li[data-verdict="ok"]', { hasText: 'sp-1' }).waitFor({ timeout: PAGE_WAIT_MS });
      expect(await page.locator('section.lane[data-lane="watched"] .badge.breaker-closed').count()).toBe(1);
      // The lane says how it fences its agents: the harness runs it in the PID namespace (or a
      // process group), as the worker's own user, so the page names it as for trusted agents only.
      const isolation = page.locator('section.lane[data-lane="watched"] .badge[data-isolation]');
      expect(await isolation.getAttribute('data-isolation')).toBe(detectIsolation());
      expect(await isolation.textContent()).toBe(`trusted agents only (${detectIsolation()})`);
      expect(pageErrors).toEqual([]);

      mkdirSync(SCREENSHOT_DIR, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOT_DIR, 'status-page.png'), fullPage: true });
    } finally {
      await context.close();
    }
  });

  it('lists blocked cards by reason, with card text shown as text, never as markup', async () => {
    const api = apiClient(t.stack.url!, TOKEN);
    const hostile = '<img src=x onerror="document.title=\'owned\'">look at <b>this</b>';
    await api.request('POST', '/v1/cards', { id: 'sp-human', lane: 'watched', title: '<script>alert(1)</script> card', metadata: { needsHuman: hostile } });
    await api.waitCard('sp-human', 'blocked', (c) => c.state === 'blocked');

    const listed = await api.request<{ lane: string; total: number; cards: Array<{ id: string; blockedReason: string; message?: string }> }>('GET', '/v1/lanes/watched/blocked');
    expect(listed.body).toMatchObject({ lane: 'watched', total: 1, cards: [{ id: 'sp-human', blockedReason: 'needs-human', message: expect.stringContaining(hostile) }] });
    expect((await api.request('GET', '/v1/lanes/watched/blocked?limit=0')).status).toBe(400);
    expect((await api.request('GET', '/v1/lanes/nope/blocked')).status).toBe(404);

    const context = await browser!.newContext({ httpCredentials: { username: 'operator', password: TOKEN } });
    try {
      const page = await context.newPage();
      await page.goto(`${t.stack.url}/`);
      const item = page.locator('details[data-blocked-reason="needs-human"] li[data-card="sp-human"]');
      await item.waitFor({ timeout: PAGE_WAIT_MS });
      expect(await item.textContent()).toContain(hostile);
      expect(await item.textContent()).toContain('<script>alert(1)</script> card');
      expect(await page.locator('[data-blocked="needs-human"]').textContent()).toBe('needs-human: 1');
      expect(await page.locator('img, b, script:not([src])').count()).toBe(0);
      expect(await page.title()).not.toBe('owned');
      mkdirSync(SCREENSHOT_DIR, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOT_DIR, 'status-page-blocked.png'), fullPage: true });

      // Cancelled, it leaves the list live, without a reload. (Unblocked, the demo agent would ask again.)
      expect((await api.request('POST', '/v1/cards/sp-human/cancel')).status).toBe(202);
      await api.waitCard('sp-human', 'cancelled', (c) => c.state === 'cancelled');
      await item.waitFor({ state: 'detached', timeout: PAGE_WAIT_MS });
    } finally {
      await context.close();
    }
  });
});

/**
 * Records, in the page, every state the slot's row shows and the row's text whenever it shows dead:
 * a respawn can be quicker than a poll, so the page's own mutations are the record of what it showed.
 */
async function recordStates(page: Page, slotName: string): Promise<void> {
  await page.evaluate((name) => {
    const w = window;
    w.seen = { [name]: [] };
    w.seenDead = [];
    const note = () => {
      const row = document.querySelector(`tr.slot[data-slot="${name}"]`);
      const state = row?.getAttribute('data-state');
      if (!row || !state) return;
      const list = w.seen[name]!;
      if (list[list.length - 1] !== state) list.push(state);
      if (state === 'dead') w.seenDead.push(row.textContent ?? '');
    };
    note();
    new MutationObserver(note).observe(document.body, { subtree: true, childList: true, attributes: true });
  }, slotName);
}
