import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/** Debian's chromium (`apt install chromium`; .ci/run installs it). */
export const CHROMIUM = '/usr/bin/chromium';
/** The page's screenshots land here (gitignored), for a person to look at after the run. */
export const SCREENSHOT_DIR = join(process.cwd(), 'test-artifacts');
/** How long a browser test waits for the page to show something. */
export const PAGE_WAIT_MS = 30_000;

const haveChromium = existsSync(CHROMIUM);
const inCi = process.env.CI === 'true' || process.env.CI === '1';
/** Locally a machine without chromium skips the status page suites, and says why; in CI they run and a missing browser fails them. */
export const skipWithoutChromium = !haveChromium && !inCi;
if (skipWithoutChromium) console.warn(`status page browser test skipped: ${CHROMIUM} is missing (apt install chromium); under CI=true it fails instead`);

/** Headless chromium as the status page suites drive it: no sandbox (tests run as root), no background traffic. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
