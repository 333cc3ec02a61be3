/**
 * `npm run documents -- <manifest>`: each trusted document's operations, upstream calls and price
 * range, from the project's own manifest (codegen's persisted-documents.json); a bad manifest is one
 * line on stderr and exit code 1.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const run = (file: string) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'scripts/documents.ts', file], {
    encoding: 'utf8',
    env: { ...process.env, MAX_DIGITS: '1000' },
    timeout: 60_000,
  });

const dir = mkdtempSync(join(tmpdir(), 'documents-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('npm run documents', () => {
  it("prices every document of the project's manifest, as a range where variables move it", () => {
    const result = run('generated/client/persisted-documents.json');
    expect(result.status).toBe(0);
    const out = result.stdout;
    expect(out).toMatch(/^8 trusted documents in generated\/client\/persisted-documents.json/);
    expect(out).toMatch(
      /sha256:[0-9a-f]{64}\n {2}IsNull: 1 upstream call at most \(isNull\); estimated \$0\.000600 to \$0\.0420/,
    );
    // pi from 1 to MAX_DIGITS (1000 here) digits, over every pi model.
    expect(out).toMatch(/ {2}Pi: 1 upstream call at most \(pi\); estimated \$0\.000400 to \$0\.0510/);
    expect(out).toMatch(/ {2}Health: 2 upstream calls at most \(health\); estimated \$0\n/);
  });

  it('refuses a bad manifest with one line and exit code 1', () => {
    const file = join(dir, 'bad.json');
    writeFileSync(file, JSON.stringify({ ['0'.repeat(64)]: '{ health { status } }' }));
    const result = run(file);
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim().split('\n')).toEqual([
      `TRUSTED_DOCUMENTS=${file}: entry 000000000000…: the key is not the sha256 of its document`,
    ]);
  });
});
