import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { startChromium } from '../../support/lab/chromium';

export { CHROMIUM_PATH } from '../../support/lab/chromium';

/** Screenshots and other browser artifacts (gitignored). */
export const ARTIFACTS_DIR = path.resolve(__dirname, '../../test-artifacts');

export interface HeadlessBrowser {
  context: BrowserContext;
  page: Page;
  /** Saves a full-page screenshot as test-artifacts/<name>.png and returns its path. */
  screenshot(name: string): Promise<string>;
  close(): Promise<void>;
}

export async function launchChromium(opts: { viewport?: { width: number; height: number } } = {}): Promise<HeadlessBrowser> {
  const { context, page, close } = await startChromium(opts);
  mkdirSync(ARTIFACTS_DIR, { recursive: true });
  return {
    context,
    page,
    async screenshot(name: string): Promise<string> {
      const file = path.join(ARTIFACTS_DIR, `${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      return file;
    },
    close,
  };
}
