/**
 * The shared state's Lua scripts live in `.lua` files beside the modules that run them (each file
 * says its KEYS, ARGV and answer): read here once, when a module loads (at start). The build copies
 * every `.lua` file of src/ into dist/ beside the JavaScript (scripts/build-dist.mjs), and the image
 * test checks that each one is there.
 */
import { readFileSync } from 'node:fs';

/** The text of `name` (a `.lua` file of this directory). */
export const luaScript = (name: string): string =>
  readFileSync(new URL(`./${name}`, import.meta.url), 'utf8');
