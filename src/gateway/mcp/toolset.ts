/**
 * The MCP tools of a gateway, fixed at start (docs/agents.md; contract §13): each one GraphQL query
 * operation, run by the request pipeline like any other.
 *
 * - Without a manifest, the built-in tools (built-in-tools.ts): the project's own operations under
 *   the contract's fixed names. With TRUSTED_DOCUMENTS, every named query operation of the manifest
 *   is a tool too, named by its operation name in snake_case, replacing a built-in tool of that name;
 *   in `enforce` mode only the manifest's operations are tools.
 * - Schemas come from the operation (tool-schemas.ts): the input from its variable definitions, the
 *   output from its selection. Arguments are checked against the input schema (ajv, compiled once
 *   per tool) before the operation is opened: an agent gets BAD_USER_INPUT naming the argument.
 * - The description says which service answers and what a call costs at the default model, from the
 *   price table the estimate starts from (cost/price-table.ts): the plan's model calls with no
 *   arguments are the defaults'. A tool calling no model costs 0 USD.
 *
 * Each built-in document is validated with the gateway's own rules at start (operation limits
 * included): one that fails (a MAX_DEPTH set very low) stays listed, and its calls answer the
 * validation errors, as POST /graphql would.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import {
  type DocumentNode,
  type GraphQLError,
  type GraphQLSchema,
  Kind,
  type OperationDefinitionNode,
  parse,
} from 'graphql';
import { roundUsd } from '../../shared/usd.js';
import { listPrice } from '../cost/price-table.js';
import { modelCalls, type OperationPlan } from '../operation/operation-plan.js';
import type { DocumentRequest, Manifest, TrustedDocumentsMode } from '../request/trusted-documents.js';
import { builtInTools } from './built-in-tools.js';
import { toolInputSchema, toolNameOf, toolOutputSchema } from './tool-schemas.js';

/** One tool: what tools/list shows, and what a call runs. */
export interface McpTool {
  /** As tools/list shows it. */
  readonly listed: Tool;
  readonly operationName: string;
  readonly document: DocumentNode;
  /** How the pipeline resolves it (trusted documents): by its manifest id, or by its text. */
  readonly request: DocumentRequest;
  /** The gateway's validation errors for its document: non-empty, every call answers them. */
  readonly invalid: readonly GraphQLError[];
  /** Undefined when the arguments fit the input schema, else what is wrong with them. */
  checkArguments(args: Record<string, unknown>): string | undefined;
}

export interface Toolset {
  /** The tools in tools/list order. */
  readonly list: readonly Tool[];
  get(name: string): McpTool | undefined;
}

export interface ToolsetOptions {
  schema: GraphQLSchema;
  /** The trusted-documents mode in effect: `enforce` lists the manifest's operations only. */
  mode: TrustedDocumentsMode;
  /** TRUSTED_DOCUMENTS (id → text); undefined without a manifest. */
  manifest: Manifest | undefined;
  /** The gateway's validation (every rule Yoga applies). */
  validate: (document: DocumentNode) => readonly GraphQLError[];
  plan: (document: DocumentNode, operationName: string | null | undefined) => OperationPlan;
}

/** A tool before its schemas are made: its name, operation and document. */
interface ToolSource {
  name: string;
  operation: OperationDefinitionNode;
  document: DocumentNode;
  request: DocumentRequest;
}

const namedQueries = (document: DocumentNode): OperationDefinitionNode[] =>
  document.definitions.filter(
    (definition): definition is OperationDefinitionNode =>
      definition.kind === Kind.OPERATION_DEFINITION &&
      definition.operation === 'query' &&
      definition.name !== undefined,
  );

/** `is_null` → `Is null`. */
const titleOf = (name: string) => {
  const words = name.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
};

/** What the description says of a call: which services answer, and its price at the default models. */
function describe(schema: GraphQLSchema, source: ToolSource, plan: OperationPlan): string {
  const rootFields = schema.getQueryType()?.getFields() ?? {};
  const fields = source.operation.selectionSet.selections.flatMap((selection) =>
    selection.kind === Kind.FIELD ? [selection.name.value] : [],
  );
  const about = fields
    .map((name) => rootFields[name]?.description)
    .filter((text): text is string => typeof text === 'string' && text !== '')
    .join(' ');
  const calls = modelCalls(plan, undefined);
  const services = [...new Set(calls.map((call) => call.upstream))];
  const usd = roundUsd(calls.reduce((sum, call) => sum + listPrice(call), 0));
  const models = [...new Set(calls.map((call) => call.model))].join(', ');
  const price =
    calls.length === 0
      ? plan.fields.length === 0
        ? 'Answered by the gateway itself, calling no service: 0 USD a call.'
        : 'Reaches the services without calling a model: 0 USD a call.'
      : `Answered by the ${services.join(' and ')} service${services.length > 1 ? 's' : ''}: about ${usd} USD a call at the default model (${models}), from the price table the gateway's cost estimate uses; _meta.cost says what each call cost.`;
  return `GraphQL query ${source.operation.name?.value}. ${about} ${price}`.replace(/\s+/g, ' ').trim();
}

export function createToolset(options: ToolsetOptions): Toolset {
  const { schema, mode, manifest } = options;
  const sources = new Map<string, ToolSource>();
  if (mode !== 'enforce') {
    for (const { name, operation, document, source } of builtInTools(schema))
      sources.set(name, { name, operation, document, request: { query: source } });
  }
  const fromManifest = new Set<string>();
  for (const [id, text] of manifest ?? []) {
    const document = parse(text);
    for (const operation of namedQueries(document)) {
      const name = toolNameOf(operation.name?.value as string);
      // The first manifest operation of a name wins (a built-in of that name is replaced).
      if (fromManifest.has(name)) continue;
      fromManifest.add(name);
      sources.set(name, { name, operation, document, request: { documentId: `sha256:${id}` } });
    }
  }

  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const tools = new Map<string, McpTool>();
  for (const source of sources.values()) {
    const { name, operation, document } = source;
    const operationName = operation.name?.value as string;
    const inputSchema = toolInputSchema(schema, operation, document) as Tool['inputSchema'];
    const outputSchema = toolOutputSchema(schema, document, operation) as Tool['outputSchema'];
    const plan = options.plan(document, operationName);
    const validateArguments: ValidateFunction = ajv.compile(inputSchema);
    const listed: Tool = {
      name,
      title: titleOf(name),
      description: describe(schema, source, plan),
      inputSchema,
      ...(outputSchema === undefined ? {} : { outputSchema }),
      annotations: {
        title: titleOf(name),
        readOnlyHint: true,
        idempotentHint: false,
        openWorldHint: true,
      },
    };
    tools.set(name, {
      listed,
      operationName,
      document,
      request: source.request,
      invalid: options.validate(document),
      checkArguments(args) {
        if (validateArguments(args)) return undefined;
        return `The arguments do not fit the input schema of ${name}: ${ajv.errorsText(validateArguments.errors, { dataVar: 'arguments' })}.`;
      },
    });
  }
  const list = [...tools.values()].map((tool) => tool.listed);
  return { list, get: (name) => tools.get(name) };
}
