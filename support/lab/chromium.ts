/**
 * Debian's headless Chromium (`apt-get install chromium`, listed in lab/deps.sh), driven by
 * playwright-core, which never downloads a browser: it drives this binary. CHROMIUM_PATH overrides
 * it. Used by the Web UI test (test/helpers/browser.ts) and the dashboard screenshot
 * (scripts/dashboard-screenshot.ts).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Chromium must not phone home: on a closed network its background connections (component
 * updates, sync, field trials, QUIC probes) are refused and slow or break page loads.
 */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

export interface ChromiumSession {
  context: BrowserContext;
  page: Page;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

export async function startChromium(opts: { viewport?: { width: number; height: number } } = {}): Promise<ChromiumSession> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: install it with \`apt-get install -y --no-install-recommends chromium\` (lab/deps.sh does)`);
  }
  // A fresh profile (--user-data-dir) per launch: no state leaks between runs, nothing is written
  // to $HOME. Playwright takes it as launchPersistentContext's argument, not as a flag.
  const userDataDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: CHROMIUM_ARGS,
      timeout: 60_000,
      viewport: opts.viewport ?? { width: 1600, height: 1000 },
    });
  } catch (err) {
    rmSync(userDataDir, { recursive: true, force: true });
    throw err;
  }
  context.setDefaultTimeout(30_000);
  context.setDefaultNavigationTimeout(60_000);
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    async close(): Promise<void> {
      await context.close().catch(() => undefined);
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
