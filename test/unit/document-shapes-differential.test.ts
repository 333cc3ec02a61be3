/**
 * Differential property test of validation by document shape (document-shapes.ts): a seeded,
 * deterministic generator writes families of documents over the gateway schema (one random shape per
 * family, then many documents of it that differ in every literal), and each document's verdict by
 * shape must equal what the gateway's full rule set gives it (`createDocumentValidator`: graphql-js's
 * rules, Yoga's, graphql-armor's depth, alias and directive limits, the suggestion and introspection
 * switches), for each configuration, in order, through one shapes instance per configuration.
 *
 * The documents cover: every root field with its arguments, unions and interfaces through inline
 * fragments and named fragments (reused ones too), aliases that overlap with equal and different
 * literals, variables with valid and invalid defaults, @include/@skip with literal and variable
 * arguments (and misplaced or unknown directives), literals of every kind at every literal place (Int
 * in and out of 32 bits, Float up to 1e999, strings with escapes and NUL, block strings, enum values
 * valid and not, null, lists, JSON objects, InferenceInput objects with missing, unknown and repeated
 * fields), nesting, aliases and directives around the limits, introspection fields, comments holding
 * odd characters (NUL, the shape key's own marker text, line separators, a BOM). About 70% of the
 * families are "clean" (only literals and the limits can make them invalid), the rest "noisy" (wrong
 * literal kinds, unknown names, misplaced directives, unused variables, ...). Documents that do not
 * parse (a few: the token limit, a bad escape) are counted and skipped, as the gateway hands them to
 * Yoga before any validation.
 *
 * Each configuration's counts are printed, and asserted so that the test cannot pass vacuously (many
 * documents judged by a learnt shape, accepted and refused, for a literal and for a merge conflict).
 * A failure prints the base seed (replay with SHAPES_SEED=<seed>; SHAPES_DOCUMENTS=<n> runs longer),
 * the family, the document and the family's earlier documents, JSON-escaped.
 */
import {
  type DocumentNode,
  type GraphQLCompositeType,
  type GraphQLError,
  type GraphQLField,
  type GraphQLInputType,
  GraphQLList,
  GraphQLNonNull,
  getNamedType,
  getNullableType,
  isAbstractType,
  isCompositeType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isListType,
  isNonNullType,
  isObjectType,
  parse,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDocumentShapes } from '../../src/gateway/http/fast-path/document-shapes.js';
import { distinctCalls, sameNamedFields } from '../../src/gateway/http/fast-path/prepared-operations.js';
import { modelCalls, planOperation } from '../../src/gateway/operation/operation-plan.js';
import { createDocumentValidator } from '../../src/gateway/plugins/use-operation-limits.js';
import { schema } from '../../src/gateway/schema/index.js';

/** The base seed; each configuration derives its own from it. */
const SEED = Number(process.env.SHAPES_SEED ?? 0x5eed_c0de) >>> 0;
/** Documents generated per configuration, at least (more with SHAPES_DOCUMENTS, for a longer hunt). */
const DOCUMENTS = Math.max(10_000, Number(process.env.SHAPES_DOCUMENTS ?? 0));

// ---------------------------------------------------------------------------------------------------
// Randomness: mulberry32, seeded, nothing else.

class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
}

// ---------------------------------------------------------------------------------------------------
// Literals: a template is text with holes, each a literal token of one kind (the kind is part of the
// shape); every document of a family fills every hole anew.

type LiteralKind = 'Int' | 'Float' | 'String' | 'BlockString';
interface Hole {
  hole: LiteralKind;
  /** The hole this one repeats (a repeated selection): mostly the same literal, sometimes not. */
  twin?: Hole;
}
type Part = string | Hole;

const SMALL_INTS = ['0', '1', '2', '3'];
const EDGE_INTS = ['2147483647', '-2147483648', '-0', '-1'];
const OUT_INTS = ['2147483648', '-2147483649', '99999999999', '4000000000', '-99999999999999999999'];
const HUGE_INT = `1${'0'.repeat(400)}`; // out of Int, and Infinity as a JSON number
const SMALL_FLOATS = ['0.5', '1.5', '0.25', '1.0'];
const OTHER_FLOATS = ['2.5e3', '1E-2', '-0.0', '3.14159', '1.7976931348623157e308', '1e-999'];
const INFINITE_FLOATS = ['1e999', '-1e999', '1.5e400', '9e9999'];
const STRINGS = [
  '"a"',
  '"b"',
  '""',
  '"\\u00e9 \\" \\\\ \\n \\t"',
  '"# not a comment"',
  '"\0"',
  '"\\u0000"',
  '"\0String\0"',
  '"🎉 \\uD83C\\uDF89"',
  '"\\u{1F600}"',
  '"{ } ( ) $ @ ..."',
];
const BLOCK_STRINGS = [
  '"""a"""',
  '""""""',
  '"""\n  multi\n    line\n"""',
  '"""with \\""" inside"""',
  '"""\0 # { """',
  '"""\r\n\0Int\0\r\n"""',
];

function literal(kind: LiteralKind, r: Random): string {
  const x = r.next();
  switch (kind) {
    case 'Int':
      if (x < 0.6) return r.pick(SMALL_INTS);
      if (x < 0.78) return String(r.int(-1000, 100_000));
      if (x < 0.9) return r.pick(EDGE_INTS);
      if (x < 0.97) return r.pick(OUT_INTS);
      return HUGE_INT;
    case 'Float':
      if (x < 0.6) return r.pick(SMALL_FLOATS);
      if (x < 0.78) return `${r.int(-99, 99)}.${r.int(0, 999)}`;
      if (x < 0.93) return r.pick(OTHER_FLOATS);
      return r.pick(INFINITE_FLOATS);
    case 'String':
      if (x < 0.85) return r.pick(STRINGS);
      return `"s${r.int(0, 1_000_000)}"`;
    case 'BlockString':
      if (x < 0.85) return r.pick(BLOCK_STRINGS);
      return `"""b${r.int(0, 1_000_000)}"""`;
  }
}

function render(parts: readonly Part[], r: Random): string {
  const values = new Map<Hole, string>();
  let text = '';
  for (const part of parts) {
    if (typeof part === 'string') {
      text += part;
      continue;
    }
    const twin = part.twin === undefined ? undefined : values.get(part.twin);
    const value = twin !== undefined && r.chance(0.85) ? twin : literal(part.hole, r);
    values.set(part, value);
    text += value;
  }
  return text;
}

// ---------------------------------------------------------------------------------------------------
// Shapes: random documents over the schema, as templates.

/** Comment texts: NUL, the shape key's marker text, quotes, braces, line separators, a BOM, emoji. */
const COMMENTS = [
  '',
  ' plain',
  ' \0',
  '\0String\0',
  ' \0Int\0 ',
  '\0BlockString\0\0Float\0',
  ' "',
  ' """',
  ' { } ( ) $ @ ...',
  ' \u2028\u2029',
  ' 🎉 é',
  '\t#',
  ' \uFEFF',
  ' \x01\x7f',
];

interface Limits {
  maxDepth: number;
  maxAliases: number;
  maxDirectives: number;
}

interface Variable {
  name: string;
  type: GraphQLInputType;
  /** The definition after the name: `: Type = default @directive`. */
  parts: Part[];
}

const BOOLEAN = schema.getType('Boolean') as GraphQLInputType;
const QUERY = schema.getQueryType()!;
const META_SCHEMA = schema.getType('__Schema') as GraphQLCompositeType;
const META_TYPE = schema.getType('__Type') as GraphQLCompositeType;
const COMPOSITE_TYPES = Object.values(schema.getTypeMap()).filter(isCompositeType);
const INPUT_TYPE_NAMES = [
  'Int',
  'Float',
  'String',
  'Boolean',
  'JSON',
  'PiModel',
  'NullModel',
  'InferenceInput',
];

class ShapeGenerator {
  private parts: Part[] = [];
  private readonly fragmentDefinitions: Part[][] = [];
  private readonly fragments: Array<{ name: string; on: string }> = [];
  private fragmentCount = 0;
  private variables: Variable[] = [];
  /** Noisy families make structural mistakes; in clean ones only literals and the limits can fail. */
  readonly noisy: boolean;

  constructor(
    private readonly r: Random,
    private readonly limits: Limits,
  ) {
    this.noisy = r.chance(0.3);
  }

  /** A structural mistake, in noisy families only. */
  private oops(p: number): boolean {
    return this.noisy && this.r.chance(p);
  }

  private sep(): string {
    const x = this.r.next();
    if (x < 0.86) return ' ';
    if (x < 0.95) return this.r.pick(['\n', ',', '\t', ' , ', '\r\n', '\uFEFF', '']);
    return ` #${this.r.pick(COMMENTS)}${this.r.pick(['\n', '\r', '\r\n'])}`;
  }

  /** Tokens, each followed by a separator (punctuators may take an empty one). */
  private t(...tokens: string[]): void {
    for (const token of tokens) {
      this.parts.push(token);
      const sep = this.sep();
      this.parts.push(sep === '' && /\w$/.test(token) ? ' ' : sep);
    }
  }

  private hole(kind: LiteralKind): void {
    this.parts.push({ hole: kind });
    const sep = this.sep();
    this.parts.push(sep === '' ? ' ' : sep);
  }

  /** Runs `write` into a fresh buffer and returns what it wrote. */
  private capture(write: () => void): Part[] {
    const saved = this.parts;
    this.parts = [];
    write();
    const written = this.parts;
    this.parts = saved;
    return written;
  }

  document(): Part[] {
    const r = this.r;
    const out: Part[] = [];
    if (r.chance(0.05)) out.push(`#${r.pick(COMMENTS)}\n`);
    if (r.chance(0.02)) out.push('\uFEFF');
    const operations = r.chance(0.9) ? 1 : 2;
    for (let i = 0; i < operations; i++) out.push(...this.operation(operations, i));
    // Fragments in a random order, after the operations (or, sometimes, before).
    const definitions = [...this.fragmentDefinitions];
    if (this.oops(0.03)) {
      definitions.push(this.capture(() => this.fragmentDefinition('Unused', QUERY, 0)));
    }
    for (const definition of definitions) {
      if (r.chance(0.2)) out.unshift(...definition);
      else out.push(...definition);
    }
    return out;
  }

  private operation(count: number, index: number): Part[] {
    const r = this.r;
    this.variables = [];
    let kind = 'query';
    if (this.oops(0.02)) kind = r.pick(['mutation', 'subscription']);
    const named = count > 1 ? !this.oops(0.03) : r.chance(0.5);
    const name = this.oops(0.03) ? 'Op' : `Op${index}`;
    const body = this.capture(() => this.rootSelectionSet());
    if (this.oops(0.03)) {
      // Declared, never used.
      this.declare(r.pick(INPUT_TYPE_NAMES.map((n) => schema.getType(n) as GraphQLInputType)));
    }
    const header = this.capture(() => {
      if (!named && this.variables.length === 0 && r.chance(0.6)) return;
      this.t(kind);
      if (named) this.t(name);
      if (this.variables.length > 0) {
        this.t('(');
        for (const variable of this.variables) {
          this.t(`$${variable.name}`);
          this.parts.push(...variable.parts);
        }
        this.t(')');
      }
      if (this.oops(0.03)) this.directives(1);
    });
    return [...header, ...body];
  }

  private rootSelectionSet(): void {
    const r = this.r;
    const { maxDepth, maxAliases, maxDirectives } = this.limits;
    // Nesting near MAX_DEPTH: inline fragments on Query count as levels for graphql-armor.
    const wrappers = r.chance(0.1) ? r.int(Math.max(0, maxDepth - 4), maxDepth + 1) : 0;
    this.t('{');
    for (let i = 0; i < wrappers; i++) this.t('...', 'on', 'Query', '{');
    const n = r.int(1, 3);
    for (let i = 0; i < n; i++) this.selection(QUERY, 1 + wrappers);
    if (r.chance(0.05)) {
      // A chain of __type { ofType { ofType ... } } near MAX_DEPTH (only __schema is not counted).
      this.t('__type', '(', 'name', ':');
      this.value(new GraphQLNonNull(schema.getType('String') as GraphQLInputType));
      this.t(')', '{');
      const links = r.int(Math.max(0, maxDepth - 3 - wrappers), maxDepth + 1 - wrappers);
      for (let i = 0; i < links; i++) this.t('ofType', '{');
      this.t('name');
      for (let i = 0; i <= links; i++) this.t('}');
    }
    if (r.chance(0.06)) {
      // Aliases around MAX_ALIASES.
      const aliases = r.int(Math.max(1, maxAliases - 3), maxAliases + 2);
      for (let i = 0; i < aliases; i++) {
        if (r.chance(0.5)) this.t(`k${i}`, ':', '__typename');
        else {
          this.t(`k${i}`, ':', 'pi', '(', 'digits', ':');
          this.hole('Int');
          this.t(')', '{', '__typename', '}');
        }
      }
    }
    if (r.chance(0.06)) {
      // Directives around MAX_DIRECTIVES.
      const directives = r.int(Math.max(1, maxDirectives - 3), maxDirectives + 2);
      for (let i = 0; i < directives; i++)
        this.t('__typename', r.pick(['@include', '@skip']), '(', 'if', ':', r.pick(['true', 'false']), ')');
    }
    for (let i = 0; i < wrappers; i++) this.t('}');
    this.t('}');
  }

  private selectionSet(type: GraphQLCompositeType, depth: number): void {
    this.t('{');
    const n = depth >= 3 || this.r.chance(0.5) ? 1 : this.r.int(2, 3);
    const used = new Set<string>();
    for (let i = 0; i < n; i++) this.selection(type, depth, used);
    this.t('}');
  }

  /** `used`: response names in this selection set (clean families do not repeat one by chance). */
  private selection(type: GraphQLCompositeType, depth: number, used = new Set<string>()): void {
    const r = this.r;
    const start = this.parts.length;
    const x = r.next();
    if (depth >= 6) this.t('__typename');
    else if (x < 0.13) this.inlineFragment(type, depth);
    else if (x < 0.23) this.fragmentSpread(type, depth);
    else this.field(type, depth, used);
    // The same selection again, its literals mostly the same: overlapping fields for the merge rule.
    if (r.chance(0.12)) {
      const again = this.parts
        .slice(start)
        .map((part) => (typeof part === 'string' ? part : { hole: part.hole, twin: part }));
      this.parts.push(...again);
    }
  }

  private field(type: GraphQLCompositeType, depth: number, used: Set<string>): void {
    const r = this.r;
    const fields = (
      isObjectType(type) || isInterfaceType(type) ? Object.values(type.getFields()) : []
    ).filter((f: GraphQLField<unknown, unknown>) => this.noisy || !used.has(f.name));
    if (type === QUERY && r.chance(0.08)) {
      if (r.chance(0.5)) {
        this.t('__schema');
        this.selectionSet(META_SCHEMA, depth + 1);
      } else {
        this.t('__type', '(', 'name', ':');
        this.value(new GraphQLNonNull(schema.getType('String') as GraphQLInputType));
        this.t(')');
        this.selectionSet(META_TYPE, depth + 1);
      }
      return;
    }
    if (fields.length === 0 || r.chance(0.08)) {
      this.t(this.oops(0.1) ? 'nope' : '__typename');
      if (r.chance(0.05)) this.directives(1);
      return;
    }
    const field = r.pick(fields);
    // Aliases: in clean families one alias names one field (two of them overlap, to be merged).
    const alias = r.chance(0.2)
      ? this.noisy
        ? r.pick(['a', 'b', 'c'])
        : `${r.pick(['a', 'b'])}_${field.name}`
      : '';
    if (alias !== '') this.t(alias, ':');
    used.add(alias || field.name);
    this.t(field.name);
    const args = field.args.filter((arg) => (isNonNullType(arg.type) ? !this.oops(0.05) : r.chance(0.6)));
    if (this.oops(0.02)) args.push({ name: 'bogus', type: BOOLEAN } as (typeof field.args)[number]);
    if (args.length > 0) {
      this.t('(');
      for (const arg of args) {
        this.t(arg.name, ':');
        this.value(arg.type);
      }
      this.t(')');
    }
    if (r.chance(0.1)) this.directives(r.chance(0.2) ? 2 : 1);
    const named = getNamedType(field.type);
    if (isCompositeType(named)) {
      if (!this.oops(0.02)) this.selectionSet(named, depth + 1);
    } else if (this.oops(0.02)) this.t('{', '__typename', '}');
  }

  /** Type conditions that apply in a selection on `type` (and, in noisy families, one that does not). */
  private typeCondition(type: GraphQLCompositeType): GraphQLCompositeType {
    const r = this.r;
    if (this.oops(0.03)) return r.pick(COMPOSITE_TYPES);
    const candidates: GraphQLCompositeType[] = [type];
    if (isAbstractType(type)) candidates.push(...schema.getPossibleTypes(type));
    if (isObjectType(type)) candidates.push(...type.getInterfaces());
    return r.pick(candidates);
  }

  private inlineFragment(type: GraphQLCompositeType, depth: number): void {
    const r = this.r;
    this.t('...');
    let on = type;
    if (r.chance(0.85)) {
      on = this.typeCondition(type);
      this.t('on', on.name);
    }
    if (r.chance(0.15)) this.directives(1);
    this.selectionSet(on, depth + 1);
  }

  private fragmentSpread(type: GraphQLCompositeType, depth: number): void {
    const r = this.r;
    const on = this.typeCondition(type);
    const existing = this.fragments.filter((f) => f.on === on.name);
    let name: string;
    if (existing.length > 0 && r.chance(0.35)) name = r.pick(existing).name;
    else {
      name = `F${this.fragmentCount++}`;
      this.fragmentDefinitions.push(this.capture(() => this.fragmentDefinition(name, on, depth)));
      // Known (so reusable) once its body is written: no fragment spreads itself.
      this.fragments.push({ name, on: on.name });
    }
    this.t('...', name);
    if (r.chance(0.1)) this.directives(1);
  }

  private fragmentDefinition(name: string, on: GraphQLCompositeType, depth: number): void {
    this.t('fragment', name, 'on', on.name);
    if (this.oops(0.05)) this.directives(1);
    this.selectionSet(on, depth + 1);
  }

  private directives(count: number): void {
    const r = this.r;
    const names = r.chance(0.5) ? ['@include', '@skip'] : ['@skip', '@include'];
    for (let i = 0; i < count; i++) {
      if (this.oops(0.05)) this.t('@deprecated');
      else if (this.oops(0.03)) {
        this.t('@unknown', '(', 'x', ':');
        this.hole('Int');
        this.t(')');
      } else {
        this.t(this.noisy ? r.pick(names) : names[i % 2]!, '(', 'if', ':');
        this.value(new GraphQLNonNull(BOOLEAN), false, 0.3);
        this.t(')');
      }
    }
  }

  /** Declares a new variable of `type` (or, in noisy families, of another type), maybe with a default. */
  private declare(type: GraphQLInputType): Variable {
    const r = this.r;
    let declared = type;
    if (this.oops(0.1)) {
      declared = r.pick([
        getNullableType(type),
        schema.getType(r.pick(INPUT_TYPE_NAMES)) as GraphQLInputType,
        new GraphQLList(type),
      ]);
    }
    const variable: Variable = { name: `v${this.variables.length}`, type: declared, parts: [] };
    this.variables.push(variable);
    variable.parts = this.capture(() => {
      this.t(':', String(declared));
      if (r.chance(0.4)) {
        this.t('=');
        this.value(declared, true);
      }
      if (this.oops(0.03)) this.directives(1);
    });
    return variable;
  }

  private variable(type: GraphQLInputType): void {
    const r = this.r;
    if (this.oops(0.03)) {
      this.t('$undeclared');
      return;
    }
    const same = this.variables.filter((v) => String(v.type) === String(type));
    const variable = same.length > 0 && r.chance(0.5) ? r.pick(same) : this.declare(type);
    this.t(`$${variable.name}`);
  }

  /** A value for an input place of `type`: mostly of its kind, sometimes not. */
  private value(type: GraphQLInputType, constant = false, variables = 0.08): void {
    const r = this.r;
    if (!constant && r.chance(variables)) {
      this.variable(type);
      return;
    }
    if (isNonNullType(type) ? this.oops(0.04) : r.chance(0.04)) {
      this.t('null');
      return;
    }
    type = getNullableType(type);
    if (isListType(type)) {
      if (r.chance(0.5)) {
        this.t('[');
        const n = r.int(0, 3);
        for (let i = 0; i < n; i++) this.value(type.ofType, constant);
        this.t(']');
      } else this.value(type.ofType, constant);
      return;
    }
    if (isInputObjectType(type)) {
      this.t('{');
      for (const field of Object.values(type.getFields())) {
        const required = isNonNullType(field.type) && field.defaultValue === undefined;
        if (required ? !this.oops(0.1) : r.chance(0.5)) {
          this.t(field.name, ':');
          this.value(field.type, constant);
          if (this.oops(0.03)) {
            this.t(field.name, ':');
            this.value(field.type, constant);
          }
        }
      }
      if (this.oops(0.05)) {
        this.t('bogus', ':');
        this.hole('Int');
      }
      this.t('}');
      return;
    }
    if (isEnumType(type)) {
      const mistake = this.oops(0.12) ? r.pick(['string', 'name'] as const) : undefined;
      if (mistake === 'string') this.hole('String');
      else if (mistake === 'name') this.t('NOT_A_MODEL');
      else this.t(r.pick(type.getValues()).name);
      return;
    }
    const x = r.next();
    switch (type.name) {
      case 'Int':
        if (this.oops(0.15)) this.hole(r.pick(['Float', 'String', 'BlockString'] as const));
        else this.hole('Int');
        return;
      case 'Float':
        if (this.oops(0.1)) this.hole(r.pick(['String', 'BlockString'] as const));
        else this.hole(x < 0.65 ? 'Float' : 'Int');
        return;
      case 'String':
        if (this.oops(0.1)) this.hole(r.pick(['Int', 'Float'] as const));
        else this.hole(x < 0.75 ? 'String' : 'BlockString');
        return;
      case 'Boolean':
        if (this.oops(0.1)) this.hole(r.pick(['Int', 'String'] as const));
        else this.t(r.pick(['true', 'false']));
        return;
      case 'JSON':
        this.json(0, constant);
        return;
      default:
        this.hole('String');
    }
  }

  /** A JSON literal: scalars of every kind, lists and objects (one leaf for ValuesOfCorrectTypeRule). */
  private json(depth: number, constant: boolean): void {
    const r = this.r;
    const x = r.next();
    if (x < 0.25) this.hole('Int');
    else if (x < 0.42) this.hole('Float');
    else if (x < 0.54) this.hole('String');
    else if (x < 0.59) this.hole('BlockString');
    else if (x < 0.66) this.t(r.pick(['true', 'false', 'null']));
    else if (x < 0.8 && depth < 3) {
      this.t('[');
      const n = r.int(0, 3);
      for (let i = 0; i < n; i++) this.json(depth + 1, constant);
      this.t(']');
    } else if (x < 0.93 && depth < 3) {
      this.t('{');
      const keys = [
        ...new Set(Array.from({ length: r.int(0, 3) }, () => r.pick(['a', 'b', '__proto__', '_9']))),
      ];
      if (this.oops(0.1) && keys.length > 0) keys.push(keys[0]!);
      for (const key of keys) {
        this.t(key, ':');
        this.json(depth + 1, constant);
      }
      this.t('}');
    } else if (x < 0.96 && !constant) {
      // A variable inside a JSON literal: an object field there has no type (any variable type is
      // allowed), a list item has JSON's.
      this.variable(
        schema.getType(this.noisy ? r.pick(['JSON', 'Int', 'String']) : 'JSON') as GraphQLInputType,
      );
    } else if (this.oops(0.5)) this.t('FOO');
    else this.hole('Float');
  }
}

// ---------------------------------------------------------------------------------------------------
// The differential run.

interface Configuration {
  name: string;
  env: Record<string, string>;
}

const CONFIGURATIONS: Configuration[] = [
  { name: 'default limits (NODE_ENV=test)', env: { NODE_ENV: 'test' } },
  { name: 'production, INTROSPECTION=false', env: { NODE_ENV: 'production', INTROSPECTION: 'false' } },
];

/** The seed of the configuration at `index` (SHAPES_SEED gives the base). */
function seedOf(index: number): number {
  return (SEED + Math.imul(index, 0x9e3779b9)) >>> 0;
}

interface Counts {
  families: number;
  documents: number;
  unparsed: number;
  valid: number;
  invalid: number;
  /** Judged without full validation (a learnt shape): accepted, refused. */
  byShapeValid: number;
  byShapeInvalid: number;
  /** Refused by shape, by the reference's reason: a literal's parseLiteral, a merge conflict. */
  byShapeLiteral: number;
  byShapeConflict: number;
  /** Lifted into their shape's operation (document-shapes.ts `lift`), asked before parsing. */
  lifted: number;
  /** Of those, compared with the document's own plan (same-named upstream fields distinct calls). */
  liftedPlans: number;
}

interface Mismatch {
  replay: string;
  family: number;
  document: number;
  query: string;
  byShape: boolean;
  full: boolean;
  errors: string[];
  /** The family's documents before this one (JSON-escaped): its first two valid ones taught the shape. */
  before: string[];
}

function differential(configuration: Configuration, index: number) {
  const seed = seedOf(index);
  const config = loadConfig(configuration.env);
  const options = {
    limits: config.limits,
    introspection: config.server.introspection,
    hideSuggestions: config.process.nodeEnv === 'production',
  };
  // The gateway's full validation runs once per document: its errors are the reference verdict, and
  // when the shapes validate that same document in full, they get those errors (not run twice).
  const validate = createDocumentValidator(schema, options);
  let current: { document: DocumentNode; errors: readonly GraphQLError[] } | undefined;
  let fullValidations = 0;
  const shapes = createDocumentShapes({
    schema,
    validate: (document: DocumentNode) => {
      fullValidations++;
      if (current?.document !== document) throw new Error('the shapes validated another document');
      return current.errors;
    },
  });
  const r = new Random(seed);
  const counts: Counts = {
    families: 0,
    documents: 0,
    unparsed: 0,
    valid: 0,
    invalid: 0,
    byShapeValid: 0,
    byShapeInvalid: 0,
    byShapeLiteral: 0,
    byShapeConflict: 0,
    lifted: 0,
    liftedPlans: 0,
  };
  const mismatches: Mismatch[] = [];
  const { maxTokens } = config.limits;
  while (counts.documents < DOCUMENTS) {
    const family = counts.families++;
    const generator = new ShapeGenerator(r, config.limits);
    const template = generator.document();
    const holes = template.filter((part) => typeof part !== 'string').length;
    const size = holes === 0 ? 2 : generator.noisy ? r.int(2, 4) : r.int(6, 16);
    const before: string[] = [];
    for (let i = 0; i < size; i++) {
      const query = render(template, r);
      counts.documents++;
      let document: DocumentNode;
      try {
        document = parse(query, { maxTokens });
      } catch {
        // The gateway never gets this far (prepared-operations.ts answers 'yoga' on a syntax error).
        counts.unparsed++;
        continue;
      }
      const errors = validate(document);
      current = { document, errors };
      const full = errors.length === 0;
      // The fast path asks for a lifted document first, before parsing: lifted means valid, and (when
      // its same-named upstream fields are distinct calls, as prepared-operations.ts requires) the
      // same plan: the same distinct upstream calls and the same models priced from the same arguments.
      const liftedDocument = shapes.lift(query, undefined, {});
      const lifted = liftedDocument !== undefined;
      if (lifted) counts.lifted++;
      let planned = true;
      if (liftedDocument !== undefined && full) {
        const liftedPlan = planOperation(schema, liftedDocument.document, undefined);
        if (distinctCalls(sameNamedFields(liftedPlan), liftedDocument)) {
          counts.liftedPlans++;
          const plan = planOperation(schema, document, undefined);
          planned =
            plan.calls === liftedPlan.calls &&
            JSON.stringify(modelCalls(plan, {})) ===
              JSON.stringify(modelCalls(liftedPlan, liftedDocument.variables));
        }
      }
      if (lifted && (!full || !planned) && mismatches.length < 3) {
        mismatches.push({
          replay: `SHAPES_SEED=${SEED} (${configuration.name}: seed ${seed}), lifted${planned ? '' : ', another plan'}`,
          family,
          document: i,
          query: JSON.stringify(query),
          byShape: true,
          full,
          errors: errors.map((e) => e.message),
          before: before.length > 6 ? [...before.slice(0, 3), '...', ...before.slice(-3)] : [...before],
        });
      }
      const calls = fullValidations;
      const byShape = shapes.valid(query, document);
      const learnt = calls === fullValidations;
      if (full) counts.valid++;
      else counts.invalid++;
      if (learnt && byShape) counts.byShapeValid++;
      if (learnt && !byShape) {
        counts.byShapeInvalid++;
        if (errors.some((e) => /conflict/.test(e.message))) counts.byShapeConflict++;
        else counts.byShapeLiteral++;
      }
      if (byShape !== full && mismatches.length < 3) {
        mismatches.push({
          replay: `SHAPES_SEED=${SEED} (${configuration.name}: seed ${seed})`,
          family,
          document: i,
          query: JSON.stringify(query),
          byShape,
          full,
          errors: errors.map((e) => e.message),
          before: before.length > 6 ? [...before.slice(0, 3), '...', ...before.slice(-3)] : [...before],
        });
      }
      before.push(JSON.stringify(query));
    }
  }
  return { counts, mismatches };
}

describe('validation by document shape, against full validation with the gateway’s rules', () => {
  CONFIGURATIONS.forEach((configuration, index) => {
    const seed = seedOf(index);
    it(
      `${configuration.name}: ${DOCUMENTS} generated documents, seed ${seed}`,
      () => {
        const started = performance.now();
        const { counts, mismatches } = differential(configuration, index);
        const ms = Math.round(performance.now() - started);
        console.info(
          `document shapes, ${configuration.name} (seed ${seed}, ${ms} ms): ${JSON.stringify(counts)}`,
        );
        expect(mismatches, `SHAPES_SEED=${SEED}: verdicts by shape that differ from full validation`).toEqual(
          [],
        );
        // Not vacuous: many documents judged by a learnt shape, both ways, for both reasons.
        expect(counts.documents).toBeGreaterThanOrEqual(DOCUMENTS);
        expect(counts.unparsed).toBeLessThan(counts.documents * 0.1);
        expect(counts.valid).toBeGreaterThan(counts.documents * 0.2);
        expect(counts.invalid).toBeGreaterThan(counts.documents * 0.2);
        expect(counts.byShapeValid).toBeGreaterThan(counts.documents * 0.15);
        expect(counts.byShapeInvalid).toBeGreaterThan(counts.documents * 0.03);
        expect(counts.byShapeLiteral).toBeGreaterThan(100);
        expect(counts.byShapeConflict).toBeGreaterThan(20);
        expect(counts.lifted).toBeGreaterThan(counts.documents * 0.05);
        expect(counts.liftedPlans).toBeGreaterThan(counts.documents * 0.03);
        // About 0.5 ms of CPU a document; shared CI machines may take several times that.
      },
      60_000 + DOCUMENTS * 10,
    );
  });
});
