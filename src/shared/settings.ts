/**
 * Settings from the environment: each component declares its own group (env variable, zod schema
 * with the default, help text), and a CLI assembles the groups it runs. One declaration drives
 * validation, defaults, `--help` and the README's configuration table (`npm run docs:tables`).
 *
 * Why one table per component: a component validates exactly the slice it is given, and a setting
 * that is validated but not documented, or documented with a stale default, cannot happen.
 * An empty variable counts as unset.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';

/** One setting: its environment variable, zod schema (which carries the default) and help text. */
export interface Setting<T extends z.ZodType = z.ZodType> {
  env: string;
  schema: T;
  /** The default as `--help` shows it (the schema holds the real one). */
  defaultText: string;
  /** One or two sentences that stand on their own (no references to documents users do not have). */
  help: string;
}

/**
 * How `--help` shows the default beyond what the schema says. A setting without a default value (its
 * schema lets it be unset) says in words what unset means; one with a default may add a note to it.
 */
type DefaultShown<T extends z.ZodType> =
  undefined extends z.output<T> ? [defaultText: string] : [shown?: { note: string }];

/**
 * A setting. Its default is shown as the schema has it (what an unset variable becomes), with the
 * note if one is given (`0 (off)`); a setting without a default value gives the text to show.
 */
export function setting<T extends z.ZodType>(
  env: string,
  schema: T,
  help: string,
  ...[shown]: DefaultShown<T>
): Setting<T> {
  const defaultText = typeof shown === 'string' ? shown : defaultTextOf(env, schema, shown?.note);
  return { env, schema, defaultText, help };
}

function defaultTextOf(env: string, schema: z.ZodType, note: string | undefined): string {
  const parsed = schema.safeParse(undefined);
  const value: unknown = parsed.success ? parsed.data : undefined;
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
    throw new Error(`setting ${env}: its default is not a plain value, so give the text --help shows`);
  }
  return note === undefined ? String(value) : `${value} (${note})`;
}

/** The settings of one component, under one heading in `--help` and the README. */
export interface SettingsGroup<S extends Record<string, Setting> = Record<string, Setting>> {
  title: string;
  settings: S;
}

export function settingsGroup<S extends Record<string, Setting>>(
  title: string,
  settings: S,
): SettingsGroup<S> {
  return { title, settings };
}

/** The validated values of one group. */
export type GroupValues<G extends SettingsGroup> = {
  [K in keyof G['settings']]: z.output<G['settings'][K]['schema']>;
};

/** The validated values of several groups, one object per group. */
export type SettingsValues<T extends Record<string, SettingsGroup>> = { [K in keyof T]: GroupValues<T[K]> };

/** A configuration error: one clear line naming the variable, never a stack trace. */
export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Variables whose values are secret: never echoed in an error. (COST_BUDGETS names keys by their
 * sha256 only, but a key pasted there by mistake must not reach a log.)
 */
const SECRET_ENV = /API_KEYS|UPSTREAM_KEYS|REDIS_URL|REDIS_CACHE_URL|COST_BUDGETS|PASSWORD|SECRET|TOKEN/;

/**
 * Reads and validates every setting of `groups` from `env`. Throws a {@link ConfigError} naming every
 * bad variable on one line.
 */
export function loadSettings<T extends Record<string, SettingsGroup>>(
  groups: T,
  env: NodeJS.ProcessEnv = process.env,
): SettingsValues<T> {
  const out: Record<string, Record<string, unknown>> = {};
  const problems: string[] = [];
  for (const [groupKey, group] of Object.entries(groups)) {
    const values: Record<string, unknown> = {};
    for (const [key, spec] of Object.entries(group.settings)) {
      const raw = env[spec.env];
      const value = raw === undefined || raw.trim() === '' ? undefined : raw.trim();
      const parsed = spec.schema.safeParse(value);
      if (parsed.success) {
        values[key] = parsed.data;
      } else {
        const issue = parsed.error.issues[0];
        const shown = SECRET_ENV.test(spec.env) ? '(value hidden)' : JSON.stringify(value);
        const problem = `${spec.env}=${shown}: ${issue?.message ?? 'invalid value'}`;
        if (!problems.includes(problem)) problems.push(problem);
      }
    }
    out[groupKey] = values;
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return out as SettingsValues<T>;
}

/** Every setting once (a variable shared by two groups, such as REDIS_URL, is listed the first time). */
function uniqueSettings(groups: Record<string, SettingsGroup>): Array<{ title: string; specs: Setting[] }> {
  const seen = new Set<string>();
  const out: Array<{ title: string; specs: Setting[] }> = [];
  for (const group of Object.values(groups)) {
    const specs = Object.values(group.settings).filter((spec) => !seen.has(spec.env));
    for (const spec of specs) seen.add(spec.env);
    // Headings are printed upper-case: 'cache' and 'Cache' are one heading, not two.
    const existing = out.find((g) => g.title.toUpperCase() === group.title.toUpperCase());
    if (existing) existing.specs.push(...specs);
    else if (specs.length > 0) out.push({ title: group.title, specs });
  }
  return out;
}

/** The environment variable of every setting of `groups`: the names a process assembled from them reads. */
export function settingEnvNames(groups: Record<string, SettingsGroup>): Set<string> {
  return new Set(Object.values(groups).flatMap((group) => Object.values(group.settings).map((s) => s.env)));
}

/** The `--help` text: `intro` lines, then every setting with its default, one heading per group. */
export function helpText(groups: Record<string, SettingsGroup>, intro: string[]): string {
  const lines = [
    ...intro,
    'Every setting is an environment variable; an empty variable counts as unset.',
    '',
  ];
  for (const { title, specs } of uniqueSettings(groups)) {
    lines.push(title.toUpperCase());
    for (const spec of specs) {
      lines.push(`  ${spec.env.padEnd(28)} default: ${spec.defaultText}`);
      lines.push(`  ${''.padEnd(28)} ${spec.help}`);
    }
    lines.push('');
  }
  return lines.join('\n').trimEnd();
}

/** The README configuration table (Markdown). */
export function markdownTable(groups: Record<string, SettingsGroup>): string {
  const rows: string[] = [];
  for (const { title, specs } of uniqueSettings(groups)) {
    for (const s of specs) {
      rows.push(
        `| \`${s.env}\` | ${s.defaultText.replace(/\|/g, '\\|')} | ${title} | ${s.help.replace(/\|/g, '\\|')} |`,
      );
    }
  }
  return ['| variable | default | group | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

// --- zod building blocks shared by every group ----------------------------------------------------

export const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
export const ratio = () => z.coerce.number().min(0).max(1);
export const bool = () =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'])
    .transform((v) => v === 'true' || v === '1' || v === 'yes' || v === 'on');
/**
 * A setting read by a parser of its own (`text → value`, throwing an Error whose message is one line
 * naming what is wrong, never a secret): unset stays undefined, a throw is the setting's issue.
 */
export const parsedBy = <T>(parse: (text: string) => T) =>
  z
    .string()
    .optional()
    .transform((value, context): T | undefined => {
      if (value === undefined) return undefined;
      try {
        return parse(value);
      } catch (error) {
        context.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    });

/**
 * A setting's text, given inline or as `@<file>` (a mounted secret, a long JSON): the file's content.
 * Throws one line naming the file, never its content.
 */
export function inlineOrFile(value: string): string {
  if (!value.startsWith('@')) return value;
  const file = value.slice(1);
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

export const httpUrl = () =>
  z
    .string()
    .url()
    .refine((u) => /^https?:\/\//.test(u), 'must be an http:// or https:// URL')
    .transform((u) => u.replace(/\/+$/, ''));
