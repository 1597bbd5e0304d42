import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, startRedis, startTestStack, waitFor, type ApiClient, type TestRedis, type TestStack } from '../harness/index.js';
import { OUTPUT_LINES_KEPT } from '../../apps/api/src/status-page/assets/cards-model.js';
import { launchChromium, PAGE_WAIT_MS, SCREENSHOT_DIR, skipWithoutChromium } from './status-page-browser.js';

const TOKEN = 'tok-status-cards';
/**
 * The agent reads its card (never a shell string): `burst` lines at once, then `line-<n>` every
 * `everyMs` up to `lines`, with `hostile` printed after the first; `result` becomes result.json.
 */
const PRINTER = `
const fs = require('node:fs');
const m = JSON.parse(fs.readFileSync(process.env.LANES_CARD_FILE, 'utf8')).metadata ?? {};
if (m.result) fs.writeFileSync(process.env.LANES_OUTPUT_DIR + '/result.json', JSON.stringify(m.result));
for (let b = 1; b <= (m.burst ?? 0); b++) console.log('burst-' + b);
let i = 0;
const tick = setInterval(() => {
  console.log('line-' + ++i);
  if (i === 1 && m.hostile) console.log(m.hostile);
  if (i >= (m.lines ?? 3)) clearInterval(tick);
}, m.everyMs ?? 100);
`;
const HOSTILE_TITLE = '<img src=x onerror="document.title=\'owned\'"> title';
const HOSTILE_LINE = '<b>bold</b><script>document.title="owned"</script>';

// The few browser globals the in-page code touches: the project compiles without the DOM lib.
declare const document: { querySelectorAll(selector: string): ArrayLike<{ textContent: string | null; getAttribute(name: string): string | null }> };

describe.skipIf(skipWithoutChromium)('the status page shows cards: live output, history, result', () => {
  let redis: TestRedis;
  let t: TestStack;
  let api: ApiClient;
  let browser: Browser | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'printing', slots: 1, agent: [process.execPath, '-e', PRINTER] }], { tokens: [TOKEN] });
    api = apiClient(t.stack.url!, TOKEN);
    browser = await launchChromium();
  });

  afterAll(async () => {
    // Each step on its own, so a failure in one still closes the others (the browser above all).
    await browser?.close().catch(() => undefined);
    await t?.stop().catch(() => undefined);
    await redis?.stop();
  });

  /** A page signed in as the operator, its script errors collected. */
  async function openPage(): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
    const context = await browser!.newContext({ httpCredentials: { username: 'operator', password: TOKEN }, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${t.stack.url}/`);
    await page.locator('#stream[data-state="live"]').waitFor({ timeout: PAGE_WAIT_MS });
    return { context, page, errors };
  }

  const shownLines = (page: Page) => page.evaluate(() => Array.from(document.querySelectorAll('#card-output .line'), (l) => l.textContent ?? ''));
  const historyStates = (page: Page) => page.evaluate(() => Array.from(document.querySelectorAll('#card-history li.history-entry'), (li) => li.getAttribute('data-state')));

  it("shows a running card's output lines as they come, within the page's cap, markup as text", async () => {
    const { context, page, errors } = await openPage();
    try {
      const id = 'sp-live';
      await api.request('POST', '/v1/cards', {
        id,
        lane: 'printing',
        title: HOSTILE_TITLE,
        metadata: { burst: OUTPUT_LINES_KEPT + 50, lines: 100_000, everyMs: 100, hostile: HOSTILE_LINE },
      });
      // Listed as running, live from the event stream (the page was open before the card was posted).
      const row = page.locator(`section.lane[data-lane="printing"] tr.card-row[data-card="${id}"][data-state="running"]`);
      await row.waitFor({ timeout: PAGE_WAIT_MS });
      expect(await row.locator('td.title').textContent()).toBe(HOSTILE_TITLE);
      expect(await row.locator('td.attempts').textContent()).toBe('1');
      await row.locator('button[data-open-card]').click();

      await page.locator('#card-output .line', { hasText: /^line-3$/ }).waitFor({ timeout: PAGE_WAIT_MS });
      expect(await page.locator('#card-output-state').textContent()).toBe('live');
      // Later lines arrive while the card still runs, without a reload.
      const seen = Number((await shownLines(page)).findLast((l) => l.startsWith('line-'))!.slice('line-'.length));
      await page.locator('#card-output .line', { hasText: new RegExp(`^line-${seen + 5}$`) }).waitFor({ timeout: PAGE_WAIT_MS });
      expect((await api.card(id)).state).toBe('running');

      // The burst overflowed the page's cap: the oldest lines went, the newest stayed, in order.
      const lines = await shownLines(page);
      expect(lines.length).toBeLessThanOrEqual(OUTPUT_LINES_KEPT);
      expect(lines).not.toContain('burst-1');
      expect(lines.slice(lines.indexOf('line-1'), lines.indexOf('line-1') + 3)).toEqual(['line-1', HOSTILE_LINE, 'line-2']);
      // Hostile text is text: no element made from it, no script run.
      expect(await page.locator('#card-title').textContent()).toContain(HOSTILE_TITLE);
      expect(await page.locator('img, b, script:not([src])').count()).toBe(0);
      expect(await page.title()).not.toBe('owned');
      mkdirSync(SCREENSHOT_DIR, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOT_DIR, 'status-page-card-live.png'), fullPage: true });

      // Cancelled, the open card says so without a reload: its stream ends and its history names it.
      expect((await api.request('POST', `/v1/cards/${id}/cancel`)).status).toBe(202);
      await page.locator(`#card[data-card="${id}"][data-state="cancelled"]`).waitFor({ timeout: PAGE_WAIT_MS });
      await page.locator('#card-output-state[data-state="ended"]').waitFor({ timeout: PAGE_WAIT_MS });
      await page.locator('#card-history li.history-entry[data-state="cancelled"]').waitFor({ timeout: PAGE_WAIT_MS });
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('opens a finished card: its history entries, its result and its output tail', async () => {
    const { context, page, errors } = await openPage();
    try {
      const id = 'sp-done';
      const result = { pr: 'https://example.invalid/pr/1', note: '<i>not markup</i>' };
      await api.request('POST', '/v1/cards', { id, lane: 'printing', title: 'finished card', metadata: { lines: 3, everyMs: 20, result } });
      const done = await api.waitCard(id, 'done', (c) => c.state === 'done');
      const row = page.locator(`section.lane[data-lane="printing"] tr.card-row[data-card="${id}"][data-state="done"]`);
      await row.waitFor({ timeout: PAGE_WAIT_MS });
      await row.locator('button[data-open-card]').click();

      await page.locator(`#card[data-card="${id}"][data-state="done"]`).waitFor({ timeout: PAGE_WAIT_MS });
      // Every history entry the API holds, in order (queued, running, done), each with its attempt.
      expect(await historyStates(page)).toEqual(done.history.map((h) => h.state));
      expect(await page.locator('#card-history li.history-entry').last().textContent()).toContain('done · attempt 1');
      expect(JSON.parse((await page.locator('#card-result').textContent())!)).toEqual(result);
      await waitFor('the output tail drawn', async () => (await shownLines(page)).join('\n') === 'line-1\nline-2\nline-3');
      expect(await page.locator('#card-output-state').textContent()).toBe('ended');
      expect(await page.locator('i').count()).toBe(0);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
