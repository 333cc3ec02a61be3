/**
 * GraphiQL in a real browser: headless Chromium (the Debian package, never a downloaded browser) driven
 * by playwright-core opens the gateway's /graphql over a real socket. For EACH example tab, a fresh
 * browser context (no stored GraphiQL state, as a newcomer's first visit) opens the page, selects the
 * tab, runs it exactly as shown (no edits), and the answer must have no errors and the expected data.
 * Every request the page makes stays on the gateway's own origin (GraphiQL works offline, no CDN),
 * under the gateway's Content-Security-Policy, without a CSP violation or a page error.
 *
 * Chromium is expected at CHROMIUM_BIN, default /usr/bin/chromium: `npm test` installs it when it is
 * missing (scripts/test-prerequisites.mjs). Missing anyway, the tests FAIL: they are never skipped.
 */
import { existsSync } from 'node:fs';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GRAPHIQL_CSP, GRAPHIQL_TABS } from '../../src/gateway/plugins/use-graphiql.js';
import { CHROMIUM, CHROMIUM_ARGS, introspection, text } from '../support/chromium.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

/** The document of a POST the page sent ('' when it is not a GraphQL JSON body). */
function sentQuery(postData: string | null): string {
  try {
    const query = (JSON.parse(postData ?? '') as { query?: unknown }).query;
    return typeof query === 'string' ? query : '';
  } catch {
    return '';
  }
}

/** The operation name of each example tab, from its query (`query Pi(` → `Pi`). */
function operationName(query: string): string {
  const name = /^query (\w+)/m.exec(query)?.[1];
  if (name === undefined) throw new Error(`an example tab without a named query:\n${query}`);
  return name;
}

/** What each tab must answer when run as shown (free tier, reference services, temperature 0). */
const EXPECTED: Record<string, unknown> = {
  IsNull: {
    isNull: {
      __typename: 'NullVerdict',
      isNull: true,
      actuallyNull: true,
      correct: true,
      model: 'NULL_X_4O',
      modelName: 'null-x-4o',
    },
  },
  Pi: {
    pi: { __typename: 'PiDigits', digits: '3.141', precision: 3, requestedDigits: 3, correctDigits: 3 },
  },
  Inference: {
    inference: { __typename: 'PiInference', digits: '3.141', precision: 3, correctDigits: 3 },
  },
  // The scoreboard holds the answers of the tabs run before it (the null check at temperature 0).
  Models: {
    models: expect.arrayContaining([
      expect.objectContaining({ service: 'null-check', model: 'null-x-4o', band: '0', accuracy: 1 }),
    ]),
  },
  Bill: {
    cheap: { modelName: 'null-x-4o', gpuCostUsd: 0.0042 },
    dear: { modelName: 'null-x-opus', gpuCostUsd: 0.042 },
  },
  Health: {
    health: {
      status: 'OK',
      nullCheck: { reachable: true, error: null },
      pi: { reachable: true, error: null },
    },
  },
};

const TABS = GRAPHIQL_TABS.map((tab, index) => ({
  index,
  name: operationName(tab.query ?? ''),
  variables: tab.variables ? (JSON.parse(tab.variables) as unknown) : undefined,
}));

describe('GraphiQL in headless Chromium', () => {
  let gateway: TestGateway | undefined;
  let origin: string;
  let browser: Browser | undefined;

  const missing = `${CHROMIUM} not found: the GraphiQL browser tests need it (npm test installs it; by hand: sudo apt-get install -y chromium).`;
  /** The browser, or a failure of the test that needs it (counted as a failed test, not a skip). */
  const launched = () => {
    if (browser === undefined) throw new Error(missing);
    return browser;
  };

  beforeAll(async () => {
    // Without Chromium nothing starts: the first test below fails with the reason, the others with it.
    if (!existsSync(CHROMIUM)) return;
    // The embedded reference services, as `npm start` runs them.
    gateway = await startTestGateway();
    origin = gateway.origin;
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  });

  afterAll(async () => {
    await browser?.close();
    await gateway?.close();
  });

  it(`finds Chromium at ${CHROMIUM}`, () => {
    expect(existsSync(CHROMIUM), missing).toBe(true);
  });

  /** Watches a page for requests off the gateway's origin, page errors and CSP violations. */
  function watch(page: Page) {
    const seen = {
      foreign: [] as string[],
      pageErrors: [] as string[],
      cspViolations: [] as string[],
      /** Start of every POST body, for a clear failure message. */
      sent: [] as string[],
    };
    page.on('request', (request) => {
      const url = request.url();
      if (request.method() === 'POST') seen.sent.push((request.postData() ?? '').slice(0, 60));
      if (!url.startsWith(origin) && !url.startsWith('data:') && !url.startsWith('blob:'))
        seen.foreign.push(url);
    });
    page.on('pageerror', (error) => seen.pageErrors.push(error.message));
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) seen.cspViolations.push(message.text());
    });
    return seen;
  }

  it.each(TABS)(
    'a first visit runs the $name tab as shown: no errors, the expected data',
    async ({ index, name, variables }) => {
      // A new context: no localStorage, no cache, nothing remembered from another tab's run.
      const context = await launched().newContext({ viewport: { width: 1280, height: 800 } });
      try {
        const page = await context.newPage();
        const seen = watch(page);
        // GraphiQL settled: it has the schema (its editors validate and run against it).
        const introspected = introspection(page);
        const response = await page.goto(`${origin}/graphql`);
        expect(response?.headers()['content-security-policy']).toBe(GRAPHIQL_CSP);

        const tabs = page.locator('.graphiql-tab-button');
        await expect
          .poll(() => tabs.allTextContents(), { timeout: 60_000 })
          .toEqual(TABS.map((tab) => tab.name));
        expect((await introspected).ok()).toBe(true);
        if (index > 0) {
          // The tabs are drag-to-reorder items: a synthetic pointer press can be taken for a drag
          // start, so the tab gets the click event itself.
          await page.locator(`.graphiql-tab-button[title="${name}"]`).dispatchEvent('click');
        }
        // Run only once the editor shows this tab (Monaco swaps its models asynchronously).
        await expect
          .poll(async () => text(await page.locator('.graphiql-query-editor').textContent()), {
            timeout: 30_000,
          })
          .toContain(`query ${name}`);

        const answered = page.waitForResponse(
          (r) =>
            r.request().method() === 'POST' &&
            new URL(r.url()).pathname === '/graphql' &&
            new RegExp(`\\bquery\\s+${name}\\b`).test(sentQuery(r.request().postData())),
          { timeout: 60_000 },
        );
        await page.locator('.graphiql-execute-button').click();
        const answer = await answered.catch((error: unknown) => {
          throw new Error(`no answer to ${name}; the page sent: ${JSON.stringify(seen.sent)}`, {
            cause: error,
          });
        });
        const sent = answer.request().postDataJSON() as { query?: unknown; variables?: unknown };
        // The tab's document exactly as shown (a trusted-documents manifest holds that text).
        expect(sent.query).toBe(GRAPHIQL_TABS[index]?.query);
        // And the tab's own headers: the Bill tab's cost cap reaches the gateway from the Headers pane.
        const headers = JSON.parse(GRAPHIQL_TABS[index]?.headers ?? '{}') as Record<string, string>;
        const requestHeaders = await answer.request().allHeaders();
        for (const [header, value] of Object.entries(headers))
          expect(requestHeaders[header.toLowerCase()]).toBe(value);
        // What the editors showed is what was sent: the tab's own example variables.
        expect(sent.variables ?? undefined).toEqual(variables);
        const body = (await answer.json()) as {
          data?: unknown;
          errors?: unknown;
          extensions?: { cost?: unknown };
        };
        expect(body.errors).toBeUndefined();
        if (name === 'Bill')
          expect(body.extensions?.cost).toMatchObject({ gpuCostUsd: 0.0462, upstreamCalls: 2, cacheHits: 0 });
        expect(body.data).toMatchObject(EXPECTED[name] as object);
        // And the result pane shows it.
        await expect
          .poll(async () => text(await page.locator('.graphiql-response').textContent()), { timeout: 30_000 })
          .toContain('"data"');

        expect(seen.foreign).toEqual([]);
        expect(seen.pageErrors).toEqual([]);
        expect(seen.cspViolations).toEqual([]);
      } finally {
        await context.close();
      }
    },
    // A cold start parses a 9 MB bundle: generous, but bounded (every wait above has its own limit).
    180_000,
  );

  /** GraphiQL opened on a fresh page of `context`, introspected, its first tab in the editor. */
  async function openedPage(context: BrowserContext) {
    const page = await context.newPage();
    const seen = watch(page);
    const introspected = introspection(page);
    await page.goto(`${origin}/graphql`);
    expect((await introspected).ok()).toBe(true);
    const editor = page.locator('.graphiql-query-editor');
    await expect
      .poll(async () => text(await editor.textContent()), { timeout: 30_000 })
      .toContain('query IsNull');
    return { page, seen, editor };
  }

  it('a query pasted over the first tab and run at once is the one that runs', async () => {
    // GraphiQL 5 learns the operation name from a debounced parse of the editor: Run pressed before it
    // (~300 ms) used to send the previous tab's name (IsNull) with the new document, and its client
    // refused with "Cannot infer operation IsNull" without sending anything. The page's clock is
    // paused from the paste to the Run, so the parse has surely not run then, however slow the machine.
    const context = await launched().newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const { page, seen, editor } = await openedPage(context);

      const answered = page.waitForResponse(
        (r) =>
          r.request().method() === 'POST' &&
          new URL(r.url()).pathname === '/graphql' &&
          /\bquery\s+Pasted\b/.test(sentQuery(r.request().postData())),
        { timeout: 60_000 },
      );
      await editor.click();
      await page.keyboard.press('ControlOrMeta+A');
      // From here to the Run no timer of the page fires (Playwright's clock, paused): the editor's
      // debounced parse cannot come first. Only the timers: the page keeps its real `performance`
      // (Monaco reads its own marks back, which the clock's stand-in does not keep).
      await page.evaluate(() => {
        (globalThis as { realPerformance?: Performance }).realPerformance = globalThis.performance;
      });
      await page.clock.install();
      await page.evaluate(() => {
        const real = (globalThis as { realPerformance?: Performance }).realPerformance;
        if (real !== undefined)
          Object.defineProperty(globalThis, 'performance', { value: real, configurable: true });
      });
      // Paused a little ahead of the page's time (seconds: it must still be ahead when the call lands;
      // the jump fires what fell due meanwhile, as time would have).
      await page.clock.pauseAt((await page.evaluate(() => Date.now())) + 10_000);
      await page.keyboard.insertText('query Pasted { pi(digits: 2) { __typename } }');
      await page.keyboard.press('ControlOrMeta+Enter');
      await page.clock.resume();
      const answer = await answered.catch(async (error: unknown) => {
        const shown = text(await page.locator('.graphiql-response').textContent());
        throw new Error(
          `the pasted query was not sent; sent: ${JSON.stringify(seen.sent)}; shown: ${shown}`,
          {
            cause: error,
          },
        );
      });
      const sent = answer.request().postDataJSON() as { operationName?: unknown };
      expect(sent.operationName).toBe('Pasted');
      expect(await answer.json()).toEqual({
        data: { pi: { __typename: 'PiDigits' } },
        extensions: expect.anything(),
      });
      expect(seen.pageErrors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 180_000);

  it('runs a query with @defer: its parts come over text/event-stream and the result pane shows them merged', async () => {
    const context = await launched().newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const { page, seen, editor } = await openedPage(context);
      await editor.click();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.insertText(
        'query Deferred { isNull(value: null) { __typename } ... @defer { pi(digits: 3) { ... on ConstantDigits { digits } } } }',
      );
      // Run once GraphiQL has parsed the editor (its operation name is known).
      await expect
        .poll(async () => text(await editor.textContent()), { timeout: 30_000 })
        .toContain('query Deferred');
      const answered = page.waitForResponse(
        (r) =>
          r.request().method() === 'POST' && /\bquery\s+Deferred\b/.test(sentQuery(r.request().postData())),
        { timeout: 60_000 },
      );
      await page.locator('.graphiql-execute-button').click();
      const answer = await answered;
      expect(answer.headers()['content-type']).toMatch(/^text\/event-stream/);
      // Both parts, merged: the initial data and the deferred field.
      await expect
        .poll(async () => text(await page.locator('.graphiql-response').textContent()), { timeout: 30_000 })
        .toMatch(/"NullVerdict"[\s\S]*"digits":\s*"3\.141"/);
      expect(seen.pageErrors).toEqual([]);
      expect(seen.cspViolations).toEqual([]);
    } finally {
      await context.close();
    }
  }, 180_000);

  it('the Headers editor carries the API key example', async () => {
    const context = await launched().newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${origin}/graphql`);
      await page.locator('.graphiql-editor-tools button', { hasText: 'Headers' }).click({ timeout: 60_000 });
      await expect
        .poll(async () => text(await page.locator('.graphiql-editor-tool').textContent()), {
          timeout: 30_000,
        })
        .toMatch(/"Authorization":\s*"Bearer /);
    } finally {
      await context.close();
    }
  }, 120_000);
});
