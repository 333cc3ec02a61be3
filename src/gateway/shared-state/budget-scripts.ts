/**
 * The budget store's Lua scripts, read at start from the `.lua` files beside this module (the build
 * copies them into dist/ with the JavaScript: package.json's `build`). Every script is
 * budget-helpers.lua (Redis' clock, the windows' layout, the sweep of expired leases) followed by its
 * own body; each file says its arguments and its answer.
 */
import { luaScript as read } from './lua-scripts.js';

/** The scripts' full texts, by name. Read once, when this module loads (at start). */
export interface BudgetScripts {
  readonly reserve: string;
  readonly settle: string;
  readonly add: string;
  readonly read: string;
  readonly share: string;
}

const helpers = read('budget-helpers.lua');
const script = (name: string) => `${helpers}\n${read(`budget-${name}.lua`)}`;

export const BUDGET_SCRIPTS: BudgetScripts = {
  reserve: script('reserve'),
  settle: script('settle'),
  add: script('add'),
  read: script('read'),
  share: script('share'),
};
