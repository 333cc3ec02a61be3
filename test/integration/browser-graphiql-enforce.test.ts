/**
 * GraphiQL in a real browser (headless Chromium, as browser-graphiql.test.ts) against a gateway that
 * enforces a trusted documents manifest (TRUSTED_DOCUMENTS_MODE=enforce): its schema introspection
 * still works (introspection-only documents run while INTROSPECTION is on), its first tabs are the
 * manifest's documents and run as shown (the page's fetcher sends the editor's text as it is, which
 * is the manifest's text: Yoga's own GraphiQL fetcher sent it minified, and it was refused), and a
 * document outside the manifest shows PERSISTED_QUERY_NOT_IN_LIST in the result pane. Ported from a
 * helper's branch (wt-trusted).
 *
 * Chromium is expected at CHROMIUM_BIN, default /usr/bin/chromium; missing, the tests FAIL.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, CHROMIUM_ARGS, introspection, text } from '../support/chromium.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

const HEALTH = `query TrustedHealth {
  health {
    status
  }
}
`;
const PI = `query TrustedPi {
  pi(digits: 2) {
    __typename
  }
}
`;

describe('GraphiQL in headless Chromium, TRUSTED_DOCUMENTS_MODE=enforce', () => {
  let gateway: TestGateway | undefined;
  let browser: Browser | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'graphiql-enforce-'));
  const missing = `${CHROMIUM} not found: the GraphiQL browser tests need it (npm test installs it; by hand: sudo apt-get install -y chromium).`;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) return;
    const file = join(dir, 'persisted-documents.json');
    writeFileSync(
      file,
      JSON.stringify({ [`sha256:${sha256(HEALTH)}`]: HEALTH, [`sha256:${sha256(PI)}`]: PI }),
    );
    gateway = await startTestGateway({ env: { TRUSTED_DOCUMENTS: file, TRUSTED_DOCUMENTS_MODE: 'enforce' } });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  });

  afterAll(async () => {
    await browser?.close();
    await gateway?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('introspects, opens the manifest as its tabs, runs them, and shows the refusal of anything else', async () => {
    expect(existsSync(CHROMIUM), missing).toBe(true);
    const origin = (gateway as TestGateway).origin;
    const context = await (browser as Browser).newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const page = await context.newPage();
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(error.message));
      const introspected = introspection(page);
      await page.goto(`${origin}/graphql`);
      const introspectionAnswer = await introspected;
      expect(introspectionAnswer.status()).toBe(200);
      const schema = (await introspectionAnswer.json()) as {
        data?: { __schema?: unknown };
        errors?: unknown;
      };
      expect(schema.errors).toBeUndefined();
      expect(schema.data?.__schema).toBeDefined();

      const tabs = page.locator('.graphiql-tab-button');
      await expect
        .poll(() => tabs.allTextContents(), { timeout: 60_000 })
        .toEqual(['TrustedHealth', 'TrustedPi']);
      await expect
        .poll(async () => text(await page.locator('.graphiql-query-editor').textContent()), {
          timeout: 30_000,
        })
        .toContain('query TrustedHealth');

      // The first tab, as shown: it runs.
      const answered = page.waitForResponse(
        (r) => r.request().method() === 'POST' && /TrustedHealth/.test(r.request().postData() ?? ''),
        { timeout: 60_000 },
      );
      await page.locator('.graphiql-execute-button').click();
      const answer = (await (await answered).json()) as { data?: unknown; errors?: unknown };
      expect(answer.errors).toBeUndefined();
      expect(answer.data).toMatchObject({ health: { status: expect.any(String) } });

      // Another document: refused, and the result pane says why.
      const editorText = async () => text(await page.locator('.graphiql-query-editor').textContent());
      await page.locator('.graphiql-query-editor .view-lines').first().click();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.press('Delete');
      await page.keyboard.insertText('query Untrusted { pi(digits: 1) { __typename } }');
      // Run only once the editor shows it (Monaco applies edits asynchronously; slow on a busy machine).
      await expect.poll(editorText, { timeout: 30_000 }).toMatch(/query Untrusted/);
      expect(await editorText()).not.toMatch(/TrustedHealth/);
      const refused = page.waitForResponse(
        (r) => r.request().method() === 'POST' && /Untrusted/.test(r.request().postData() ?? ''),
        { timeout: 60_000 },
      );
      await page.locator('.graphiql-execute-button').click();
      const refusal = (await (await refused).json()) as {
        errors?: Array<{ extensions?: { code?: string } }>;
      };
      expect(refusal.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_IN_LIST');
      await expect
        .poll(async () => text(await page.locator('.graphiql-response').textContent()), { timeout: 30_000 })
        .toContain('PERSISTED_QUERY_NOT_IN_LIST');
      expect(pageErrors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 180_000);
});
