/**
 * GraphiQL in a real browser: headless Chromium (the Debian package, never a downloaded browser) driven
 * by playwright-core opens the gateway's /graphql over a real socket, picks the example Pi tab, runs it
 * and reads the digits in the result pane. Every request the page makes must stay on the gateway's own
 * origin (GraphiQL works offline, no CDN).
 *
 * Skipped, with a visible notice, where /usr/bin/chromium is missing (.ci/run installs it when it can).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDigitEngine, type DigitEngine } from '../../src/digits/digit-engine.js';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { createGateway } from '../../src/gateway/yoga.js';
import { type RunningServices, startServices } from '../../src/services/start-services.js';

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  console.warn(
    `browser-graphiql: SKIPPED — ${CHROMIUM} not found. Install it with: apt-get install -y chromium (.ci/run does).`,
  );
}

/** Chromium flags: headless, no sandbox (containers), and no traffic of its own beyond the page. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const SCREENSHOT = '/tmp/graphiql-pi.png';

/** Monaco draws spaces as no-break spaces. */
const text = (raw: string | null) => (raw ?? '').replace(/\u00a0/g, ' ');

describe.skipIf(!hasChromium)('GraphiQL in headless Chromium', () => {
  let services: RunningServices;
  let clients: HttpUpstreamClients;
  let digits: DigitEngine;
  let server: Server;
  let origin: string;
  let profileDir: string;
  let browser: BrowserContext;

  beforeAll(async () => {
    services = await startServices({ host: '127.0.0.1' });
    clients = createUpstreamClients({ nullBaseUrl: services.nullCheckUrl, piBaseUrl: services.piDigitsUrl });
    digits = createDigitEngine({ useWorker: false });
    const config = loadConfig({ NODE_ENV: 'test' });
    const gateway = createGateway({ clients, digits, config, logger: pino({ level: 'silent' }) });
    server = createServer(gateway);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // A fresh profile per run: nothing cached or remembered from an earlier run.
    profileDir = mkdtempSync(join(tmpdir(), 'graphiql-chromium-'));
    browser = await chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 800 },
    });
  });

  afterAll(async () => {
    await browser?.close();
    if (profileDir) rmSync(profileDir, { recursive: true, force: true });
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await clients?.close();
    await services?.close();
    await digits?.close();
  });

  it('opens GraphiQL, runs the example Pi query and shows the digits', async () => {
    const page = browser.pages()[0] ?? (await browser.newPage());
    const foreign: string[] = [];
    const pageErrors: string[] = [];
    page.on('request', (request) => {
      const url = request.url();
      if (!url.startsWith(origin) && !url.startsWith('data:') && !url.startsWith('blob:')) foreign.push(url);
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));

    await page.goto(`${origin}/graphql`);
    // One example tab per query, as the gateway configures them.
    const tabs = page.locator('.graphiql-tab-button');
    await expect
      .poll(() => tabs.allTextContents(), { timeout: 30_000 })
      .toEqual(expect.arrayContaining(['IsNull', 'Pi', 'Inference', 'Health']));
    // The tabs are drag-to-reorder items: a synthetic pointer press can be taken for a drag start, so
    // the tab gets the click event itself.
    await page.locator('.graphiql-tab-button[title="Pi"]').dispatchEvent('click');
    // Run only once the editors show the Pi tab (Monaco swaps its models asynchronously).
    await expect
      .poll(async () => text(await page.locator('.graphiql-query-editor').textContent()), { timeout: 30_000 })
      .toContain('query Pi(');
    // The Headers tab carries the API key example.
    await page.locator('.graphiql-editor-tools button', { hasText: 'Headers' }).click();
    await expect
      .poll(async () => text(await page.locator('.graphiql-editor-tool').textContent()), {
        timeout: 10_000,
      })
      .toMatch(/"Authorization":\s*"Bearer /);

    await page.locator('.graphiql-execute-button').click();
    const response = page.locator('.graphiql-response');
    await expect
      .poll(async () => text(await response.textContent()), { timeout: 30_000 })
      .toMatch(/"digits":\s*"3\.14\d*"/);
    const shown = text(await response.textContent());
    expect(shown).toContain('"__typename": "PiDigits"');

    await page.screenshot({ path: SCREENSHOT });
    expect(foreign).toEqual([]);
    expect(pageErrors).toEqual([]);
    // A cold start parses a 9 MB bundle: generous, but bounded (every wait above has its own limit).
  }, 120_000);
});
