import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { FrameLocator, Locator, Page } from 'playwright-core';
import { hostTaskQueue } from '../../src/config';
import type { SnapshotResult } from '../../src/model/types';
import { run as snapshotCli } from '../../src/cli/commands/snapshot';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { launchChromium } from '../helpers/browser';
import type { HeadlessBrowser } from '../helpers/browser';
import { CephView } from '../helpers/ceph-inspect';
import { ensureThawed } from '../helpers/guest';
import { need } from '../../support/lab/env';

/*
 * What an operator sees in the Temporal Web UI (issue 7), checked in a real browser: Debian's
 * headless Chromium driven by playwright-core against the lab's dev server UI (2.42.x).
 *
 * A real run: `vmsnap snapshot` (the CLI's own start code) on a real host worker snapshots the
 * 1-disk guest end to end. Then the UI must
 *   - find it with one search-attribute filter in the workflows list
 *     (/namespaces/<ns>/workflows?query=<visibility query>),
 *   - show its static summary/details, current details and the activity summaries
 *     (tab "User Metadata": summary and details are rendered as markdown in iframes),
 *   - show every vmsnap search attribute with its final value (tab "Search Attributes"),
 *   - show the input in the memo (tab "Memo").
 * Screenshots of each page land in test-artifacts/web-ui-*.png.
 */

let h: Harness;
let ceph: CephView;
let browser: HeadlessBrowser | undefined;
let ui: string;
let namespace: string;
let guest: string;
let workflowId: string;
let result: SnapshotResult | undefined;

const PAGE_TIMEOUT = 60_000;

beforeAll(async () => {
  h = await startHarness();
  ceph = new CephView(h.vars);
  ui = need(h.vars, 'TEMPORAL_UI_URL').replace(/\/+$/, '');
  namespace = h.config.temporal.namespace;
  guest = need(h.vars, 'VMSNAP_GUEST_1DISK');
  // Tall enough that the UI's inner scroll areas (events with metadata, history) fit the screenshots.
  browser = await launchChromium({ viewport: { width: 1600, height: 1700 } });
});

afterAll(async () => {
  await browser?.close();
  if (h && workflowId) {
    // A run that is still going (a failed assertion before it finished) must not linger.
    const handle = h.client.workflow.getHandle(workflowId);
    const desc = await handle.describe().catch(() => undefined);
    if (desc?.status.name === 'RUNNING') await handle.terminate('web-ui test cleanup').catch(() => undefined);
  }
  for (const d of result?.disks ?? []) if (d.image) await ceph.removeImage(d.image.split('/')[0], d.image.split('/')[1]);
  if (h && guest) await ensureThawed(h.vars, guest);
  await h?.stop();
});

/** Runs `vmsnap snapshot …` in-process (the operator's start path) and returns its --json output. */
async function cliSnapshot(args: string[]): Promise<{ workflowId: string; runId: string; taskQueue: string }> {
  let out = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  });
  let code: number;
  try {
    code = await snapshotCli(args);
  } finally {
    spy.mockRestore();
  }
  expect(code, out).toBe(0);
  return JSON.parse(out) as { workflowId: string; runId: string; taskQueue: string };
}

/** The markdown iframe that follows a section heading ("Summary", "Details", "Current Details"). */
function markdownFrame(page: Page, heading: string): FrameLocator {
  return page
    .locator(`xpath=//*[normalize-space(text())="${heading}"]/following::iframe[@title="output"][1]`)
    .contentFrame();
}

async function openTab(page: Page, name: string, path: string): Promise<void> {
  const tab = page.getByRole('tab', { name, exact: true });
  await tab.click();
  await expect.poll(() => tab.getAttribute('aria-selected'), { timeout: PAGE_TIMEOUT }).toBe('true');
  await page.waitForURL((u) => u.pathname.endsWith(`/${path}`), { timeout: PAGE_TIMEOUT });
}

async function visible(l: Locator): Promise<void> {
  await l.first().waitFor({ state: 'visible', timeout: PAGE_TIMEOUT });
}

describe('Temporal Web UI (headless Chromium)', () => {
  it('finds a real snapshot run by its search attributes and shows its summary, details, activity summaries, attributes and memo', async () => {
    const page = browser!.page;
    const host = h.config.host;
    workflowId = uniqueId('ui-snap');

    // Start it the way an operator does; the harness worker polls the host's task queue.
    const started = await cliSnapshot([
      guest,
      '--host', host,
      '--temporal-address', h.config.temporal.address,
      '--namespace', namespace,
      '--quiesce', 'require',
      '--workflow-id', workflowId,
      '--json',
    ]);
    expect(started.taskQueue).toBe(hostTaskQueue(host));
    expect(started.taskQueue).toBe(h.hw.taskQueue);
    result = (await h.client.workflow.getHandle(workflowId).result()) as SnapshotResult;
    expect(result.quiesced).toBe(true);
    expect(result.disks).toHaveLength(1);
    const summary = `snapshot ${guest}: all RBD disks → images`;
    const details = `quiesce=require, freeze deadline 10000 ms, host ${host}`;

    // 1. Workflows list, filtered by one visibility query over vmsnap's search attributes.
    const query = `VmsnapDomain="${guest}" AND VmsnapHost="${host}" AND VmsnapQuiesced=true AND VmsnapResult="succeeded"`;
    await page.goto(`${ui}/namespaces/${namespace}/workflows?query=${encodeURIComponent(query)}`);
    const link = page.getByRole('link', { name: workflowId, exact: true });
    // Visibility is eventually consistent: reload until the row shows up.
    await expect
      .poll(
        async () => {
          if ((await link.count()) > 0) return true;
          await page.reload();
          await page.getByRole('table').first().waitFor({ timeout: PAGE_TIMEOUT }).catch(() => undefined);
          return (await link.count()) > 0;
        },
        { timeout: 90_000, interval: 2_000 },
      )
      .toBe(true);
    const row = page.getByRole('row').filter({ has: link });
    await expect.poll(() => row.count()).toBe(1);
    const rowText = await row.innerText();
    expect(rowText).toContain('Completed');
    expect(rowText).toContain('consistentSnapshot');
    // The query survived into the page's filter state: the list is exactly this run.
    expect(await page.getByRole('link', { name: /^ui-snap-/ }).count()).toBe(1);
    await browser!.screenshot('web-ui-list');

    // 2. The run's page: header and event history.
    await link.first().click();
    await page.waitForURL((u) => u.pathname.includes(`/workflows/${workflowId}/`), { timeout: PAGE_TIMEOUT });
    await visible(page.getByText(workflowId, { exact: true }));
    await visible(page.getByText('Completed', { exact: true }));
    await visible(page.getByRole('link', { name: hostTaskQueue(host) }));
    await browser!.screenshot('web-ui-history');

    // 3. User Metadata: static summary and details, current details, events with activity summaries.
    await openTab(page, 'User Metadata', 'user-metadata');
    await visible(markdownFrame(page, 'Summary').getByText(summary, { exact: true }));
    await visible(markdownFrame(page, 'Details').getByText(details, { exact: true }));
    const current = markdownFrame(page, 'Current Details');
    await visible(current.getByText(/phase:\s*done/));
    await visible(current.getByText(new RegExp(`domain:\\s*${guest}`)));
    // The flatten line is there; its value is whatever the last throttled progress signal said.
    await visible(current.getByText(/flatten vdb: \d+%/));
    // "Events with Metadata" lists every activity (and the lock child workflow) by its summary;
    // freeze, snapshot and thaw are local activities, inside the freeze window.
    const [pool, image] = result.disks[0].image!.split('/');
    for (const s of [
      `inspect ${guest}`,
      `freeze ${guest}`,
      'snapshot 1 disk(s)',
      `thaw ${guest}`,
      `clone vdb → ${pool}/${image}`,
      `flatten ${image}`,
      `finalize ${image}`,
    ]) {
      await visible(page.getByText(s, { exact: true }));
    }
    await browser!.screenshot('web-ui-user-metadata');

    // 4. Search attributes, with their final values.
    await openTab(page, 'Search Attributes', 'search-attributes');
    const attrs = page.locator('main');
    for (const [k, v] of [
      ['VmsnapDomain', `"${guest}"`],
      ['VmsnapHost', `"${host}"`],
      ['VmsnapPhase', '"done"'],
      ['VmsnapQuiesced', 'true'],
      ['VmsnapResult', '"succeeded"'],
    ]) {
      await expect.poll(() => attrs.innerText(), { timeout: PAGE_TIMEOUT }).toMatch(new RegExp(`"${k}":\\s*${v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    }
    await browser!.screenshot('web-ui-search-attributes');

    // 5. Memo: the request as given.
    await openTab(page, 'Memo', 'memo');
    await expect.poll(() => page.locator('main').innerText(), { timeout: PAGE_TIMEOUT }).toMatch(new RegExp(`"input":\\s*\\{\\s*"domain":\\s*"${guest}"`));
    await expect.poll(() => page.locator('main').innerText()).toMatch(/"quiesce":\s*"require"/);
    await browser!.screenshot('web-ui-memo');
  });
});
