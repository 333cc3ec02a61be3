/**
 * What the browser tests share: where Debian's Chromium is, the flags it runs with, and reading
 * GraphiQL's editors. `npm test` installs Chromium when it is missing (scripts/test-prerequisites.mjs);
 * missing anyway, the browser tests FAIL: they are never skipped.
 */
import type { Page, Response } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';

/** Chromium flags: headless, no sandbox (containers), and no traffic of its own beyond the page. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Monaco draws spaces as no-break spaces. */
export const text = (raw: string | null) => (raw ?? '').replace(/\u00a0/g, ' ');

/** GraphiQL's schema introspection answered: from then on its editors validate and run against it. */
export const introspection = (page: Page): Promise<Response> =>
  page.waitForResponse((r) => /IntrospectionQuery/.test(r.request().postData() ?? ''), { timeout: 60_000 });
