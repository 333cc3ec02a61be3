import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { appSettings, helpText } from '../../src/config.js';
import { replaceConfigTable } from '../../src/readme-config.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('README configuration table', () => {
  it('is the table generated from src/config.ts (run `npm run config:table` when this fails)', () => {
    expect(readme).toBe(replaceConfigTable(readme));
  });

  it('names every setting, as --help does', () => {
    const help = helpText();
    for (const spec of Object.values(appSettings).flatMap((group) => Object.values(group.settings))) {
      expect(readme).toContain(`\`${spec.env}\``);
      expect(help).toContain(spec.env);
    }
  });
});
