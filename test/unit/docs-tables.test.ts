import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIGURATION, CONTRACT, replaceConfigTable, replaceErrorTable } from '../../scripts/docs-tables.js';
import { appSettings, helpText } from '../../src/config.js';
import { ERROR_CODES } from '../../src/gateway/errors.js';

describe('generated documentation tables (run `npm run docs:tables` when one fails)', () => {
  it('docs/configuration.md shows the configuration table generated from the settings, with every setting', () => {
    const readme = readFileSync(CONFIGURATION, 'utf8');
    expect(readme).toBe(replaceConfigTable(readme));
    const help = helpText();
    for (const spec of Object.values(appSettings).flatMap((group) => Object.values(group.settings))) {
      expect(readme).toContain(`\`${spec.env}\``);
      expect(help).toContain(spec.env);
    }
  });

  it('docs/contract.md shows the error codes of src/gateway/errors.ts', () => {
    const contract = readFileSync(CONTRACT, 'utf8');
    expect(contract).toBe(replaceErrorTable(contract));
    for (const code of Object.keys(ERROR_CODES)) expect(contract).toContain(`| \`${code}\` |`);
  });
});
