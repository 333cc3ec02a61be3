/**
 * What an operation will ask of the upstreams, read from its document before anything runs: the
 * distinct upstream calls (MAX_UPSTREAM_CALLS) and, with the variables, which models they use (the
 * cost estimate of X-Max-Cost-Usd). Both count the same way.
 *
 * The knowledge of which root fields call an upstream lives on the fields themselves, as the Pothos
 * field extension `upstream` (schema/*.ts): a new field that calls an upstream declares it there and
 * cannot escape the limits.
 */
import {
  type DocumentNode,
  type FieldNode,
  type GraphQLField,
  type GraphQLSchema,
  getArgumentValues,
  getVariableValues,
  Kind,
  type OperationDefinitionNode,
  print,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import type { UpstreamName } from '../errors.js';

/** One upstream call a root field makes, for the cost estimate. */
export interface ModelCall {
  upstream: UpstreamName;
  /** Which call: the null check, pi, or inference (priced per token). */
  kind: 'check' | 'pi' | 'inference';
  model: string;
  /** Digits asked for (pi and inference), which drive their price. */
  digits?: number | undefined;
  /**
   * The caller asked for a quality rather than a model (`minAccuracy`, without `model`): the model is
   * the router's choice (models/router.ts), made before the estimate; `model` is the service default.
   */
  route?: ModelRoute | undefined;
}

/** What routing by quality needs of a call: the accuracy asked for and the temperature (its band). */
export interface ModelRoute {
  minAccuracy: number;
  temperature: number | undefined;
}

/**
 * The route of a call whose arguments ask for `minAccuracy` (0 to 1) and no `model`; undefined
 * otherwise (an out-of-range value or `model` beside it fails in the resolver, BAD_USER_INPUT).
 */
export function routeOf(args: {
  model?: unknown;
  minAccuracy?: unknown;
  temperature?: unknown;
}): ModelRoute | undefined {
  const minAccuracy = args.minAccuracy;
  if (args.model != null || typeof minAccuracy !== 'number' || !(minAccuracy >= 0 && minAccuracy <= 1))
    return undefined;
  return { minAccuracy, temperature: numberArgument(args.temperature) };
}

/** A coerced argument as `models` reads it: the value when it is a string, else undefined (omitted, null). */
export const stringArgument = (value: unknown): string | undefined =>
  typeof value === 'string' ? value : undefined;
/** A coerced argument as `models` reads it: the value when it is a number, else undefined (omitted, null). */
export const numberArgument = (value: unknown): number | undefined =>
  typeof value === 'number' ? value : undefined;

/** The `upstream` extension of a root field (Pothos `extensions: { upstream: ... }`). */
export interface UpstreamFieldExtension {
  /** Upstream calls one distinct use of the field makes (health: one per upstream). */
  calls: number;
  /** The calls' models, from the field's coerced arguments; absent: free (health). */
  models?: (args: Record<string, unknown>) => ModelCall[];
  /**
   * The arguments `models` reads. The estimate is made from these alone, and reused for every request
   * whose variables agree on them (an isNull of a new value is priced as the last one was).
   * @default every argument of the field
   */
  pricedBy?: readonly string[];
  /**
   * Where the field takes `minAccuracy` (routing by quality): an argument (`minAccuracy`) or a field of
   * an input argument (`input.minAccuracy`). A document that cannot carry it there is never routed,
   * and pays nothing for routing.
   */
  routedBy?: string;
  /**
   * The arguments routing reads besides `pricedBy` (the accuracy asked for, the temperature's band),
   * priced only in documents that may route: elsewhere a distinct temperature per request must not
   * make a distinct estimate per request.
   */
  routedReads?: readonly string[];
}

export interface PlannedField {
  node: FieldNode;
  field: GraphQLField<unknown, unknown>;
  extension: UpstreamFieldExtension;
}

/** A model-calling field with only its priced arguments, on the definition and in the document. */
interface PricedField {
  node: FieldNode;
  field: GraphQLField<unknown, unknown>;
  models: (args: Record<string, unknown>) => ModelCall[];
}

export interface OperationPlan {
  /** Distinct upstream calls: root fields counted once per distinct (name, printed arguments). */
  calls: number;
  /** The distinct upstream-calling fields. */
  fields: PlannedField[];
  /** The model-calling fields, with their priced arguments only. */
  priced?: readonly PricedField[];
  /**
   * The variables the priced arguments use, in a fixed order; undefined when there are none. Requests
   * whose values of these agree have the same estimate.
   */
  pricedVariables?: readonly string[];
  /**
   * The request's priced variables coerced to the operation's variable types (enum names become the
   * upstream strings, variable defaults apply); undefined when they do not coerce.
   */
  coerceVariables?: (variables: Record<string, unknown> | undefined) => Record<string, unknown> | undefined;
  /** Whether a field may ask for `minAccuracy` (read from the document alone): routing is looked at then. */
  routable?: boolean;
}

const EMPTY: OperationPlan = { calls: 0, fields: [] };

function upstreamExtension(
  field: GraphQLField<unknown, unknown> | undefined,
): UpstreamFieldExtension | undefined {
  return (field?.extensions as { upstream?: UpstreamFieldExtension } | undefined)?.upstream;
}

function operationOf(
  document: DocumentNode,
  operationName: string | null | undefined,
): OperationDefinitionNode | undefined {
  let found: OperationDefinitionNode | undefined;
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    if (operationName ? definition.name?.value === operationName : found === undefined) found = definition;
  }
  return found;
}

/**
 * The upstream calls of the operation. Variables count by name, not value: an upper bound that never
 * needs to look at (possibly huge) variable values.
 */
export function planOperation(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName?: string | null,
): OperationPlan {
  const operation = operationOf(document, operationName);
  const root = schema.getQueryType();
  if (operation?.operation !== 'query' || root == null) return EMPTY;
  const rootFields = root.getFields();
  const fragments = new Map<string, SelectionSetNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION)
      fragments.set(definition.name.value, definition.selectionSet);

  const keys = new Set<string>();
  const fields: PlannedField[] = [];
  let calls = 0;
  const pending: SelectionSetNode[] = [operation.selectionSet];
  const seenFragments = new Set<string>();
  while (pending.length > 0) {
    for (const selection of (pending.pop() as SelectionSetNode).selections) {
      if (selection.kind === Kind.FIELD) {
        const field = rootFields[selection.name.value];
        const extension = upstreamExtension(field);
        if (field === undefined || extension === undefined) continue;
        const key = callKey(selection);
        if (keys.has(key)) continue;
        keys.add(key);
        calls += extension.calls;
        fields.push({ node: selection, field, extension });
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        pending.push(selection.selectionSet);
      } else {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (fragment !== undefined && !seenFragments.has(name)) {
          seenFragments.add(name);
          pending.push(fragment);
        }
      }
    }
  }
  const used = new Set<string>();
  const priced = fields.flatMap((planned) => pricedField(planned, used) ?? []);
  // Raw request variables hold enum NAMES (`PI_X_MINI`, priced as an unknown model) and lack the
  // variables' defaults, while getArgumentValues expects coerced values: the priced ones are coerced
  // first (only those: a large `value` is never read for an estimate).
  const variableDefinitions = (operation.variableDefinitions ?? []).filter((d) =>
    used.has(d.variable.name.value),
  );
  const coerceVariables = (variables: Record<string, unknown> | undefined) =>
    getVariableValues(schema, variableDefinitions, variables ?? {}, { maxErrors: 1 }).coerced;
  const pricedVariables = variableDefinitions.map((d) => d.variable.name.value);
  return {
    calls,
    fields,
    priced,
    pricedVariables: pricedVariables.length === 0 ? undefined : pricedVariables,
    coerceVariables,
    routable: fields.some(mayRoute),
  };
}

/**
 * Whether the field, as written, may carry `minAccuracy` where its extension says: the argument is
 * there, or the input argument is a variable or an object literal with that field.
 */
function mayRoute({ node, extension }: PlannedField): boolean {
  const path = extension.routedBy;
  if (path === undefined) return false;
  const [name, inner] = path.split('.');
  const argument = node.arguments?.find((a) => a.name.value === name);
  if (argument === undefined) return false;
  if (inner === undefined) return true;
  const value = argument.value;
  if (value.kind === Kind.VARIABLE) return true;
  return value.kind === Kind.OBJECT && value.fields.some((f) => f.name.value === inner);
}

/**
 * The models each model-calling field uses with these variables (defaults where arguments cannot be
 * read), by the field's response key (its alias, else its name).
 */
export function modelCallsByField(
  plan: OperationPlan,
  variables: Record<string, unknown> | undefined,
): Array<{ key: string; calls: ModelCall[] }> {
  const out: Array<{ key: string; calls: ModelCall[] }> = [];
  const coerced = plan.coerceVariables === undefined ? (variables ?? {}) : plan.coerceVariables(variables);
  for (const { node, field, models } of plan.priced ?? []) {
    let args: Record<string, unknown>;
    try {
      if (coerced === undefined) throw new Error('variables do not coerce');
      args = getArgumentValues(field, node, coerced);
    } catch {
      // Bad variables fail the operation anyway; estimate it with the fields' defaults.
      args = {};
    }
    out.push({ key: node.alias?.value ?? node.name.value, calls: models(args) });
  }
  return out;
}

/** The models the planned calls use with these variables (defaults where arguments cannot be read). */
export function modelCalls(plan: OperationPlan, variables: Record<string, unknown> | undefined): ModelCall[] {
  return modelCallsByField(plan, variables).flatMap((field) => field.calls);
}

/** The names of the variables used anywhere in `value`. */
/**
 * What makes two upstream fields one call: the field's name and its arguments as printed, in name
 * order (`a: pi(digits: 2)` and `b: pi(digits: 2)` are one call). `replace` swaps each argument's
 * value first (a lifted document's variables by their literals: prepared-operations.ts).
 */
export function callKey(field: FieldNode, replace?: (value: ValueNode) => ValueNode): string {
  const args = (field.arguments ?? [])
    .map((a) => `${a.name.value}:${print(replace === undefined ? a.value : replace(a.value))}`)
    .sort()
    .join(',');
  return `${field.name.value}(${args})`;
}

function variablesIn(value: ValueNode, into: Set<string>): void {
  if (value.kind === Kind.VARIABLE) into.add(value.name.value);
  else if (value.kind === Kind.LIST) for (const item of value.values) variablesIn(item, into);
  else if (value.kind === Kind.OBJECT) for (const field of value.fields) variablesIn(field.value, into);
}

/** The field cut down to its priced arguments (all of them without `pricedBy`). */
function pricedField(planned: PlannedField, variables: Set<string>): PricedField | undefined {
  const { node, field, extension } = planned;
  if (extension.models === undefined) return undefined;
  const pricedBy = extension.pricedBy;
  const routed = mayRoute(planned) ? extension.routedReads : undefined;
  const keep = (name: string) =>
    pricedBy === undefined || pricedBy.includes(name) || routed?.includes(name) === true;
  const args = (node.arguments ?? []).filter((a) => keep(a.name.value));
  for (const argument of args) variablesIn(argument.value, variables);
  return {
    node: { ...node, arguments: args },
    field: { ...field, args: field.args.filter((a) => keep(a.name)) },
    models: extension.models,
  };
}

/**
 * `planOperation` memoized per parsed document and operation name. Parsed documents come from a
 * parse cache (Yoga's, or the fast path's), so the same object repeats.
 */
export function createPlanner(
  schema: GraphQLSchema,
): (document: DocumentNode, operationName: string | null | undefined) => OperationPlan {
  const plans = new WeakMap<DocumentNode, Map<string, OperationPlan>>();
  return (document, operationName) => {
    let byName = plans.get(document);
    if (byName === undefined) {
      byName = new Map();
      plans.set(document, byName);
    }
    const name = operationName ?? '';
    let plan = byName.get(name);
    if (plan === undefined) {
      plan = planOperation(schema, document, operationName);
      byName.set(name, plan);
    }
    return plan;
  };
}
