/**
 * A typed GraphQL client of the gateway: graphql-request 7 with the documents GraphQL Code Generator
 * (client preset) generates into generated/client/ from schema.graphql and test/operations/*.graphql.
 *
 * It shows what a frontend must handle: every member of every union (switch on `__typename`, checked
 * exhaustively by the compiler), every error code of the contract (also exhaustive), partial results,
 * the sponsor messages in `extensions.sponsoredBy`, the bill in `extensions.cost`, a cost cap
 * (`X-Max-Cost-Usd`), and the `x-request-id` to quote in a bug report.
 *
 * Run it against a running gateway (`npm start` in another terminal):
 *   npm run codegen && npx tsx examples/typed-client.ts http://localhost:4000/graphql
 */
import { pathToFileURL } from 'node:url';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { ClientError, GraphQLClient } from 'graphql-request';
import {
  HealthDocument,
  type HealthStatus,
  InferenceDocument,
  type InferenceQuery,
  IsNullDocument,
  type IsNullQuery,
  IsNullUndefinedDocument,
  ModelsDocument,
  NullAndPiDocument,
  PiDocument,
  type PiQuery,
  RoutedPiDocument,
} from '../generated/client/graphql.js';

// --- errors ----------------------------------------------------------------------------------------

/** Every `extensions.code` a client acts on (docs/contract.md, Errors; BUDGET_EXCEEDED: Cost). */
export const GATEWAY_ERROR_CODES = [
  'UNDEFINED_VALUE',
  'TIER_FORBIDDEN',
  'RATE_LIMITED',
  'NULL_PARADOX',
  'UPSTREAM_ERROR',
  'UPSTREAM_UNAVAILABLE',
  'UPSTREAM_TIMEOUT',
  'UPSTREAM_BAD_RESPONSE',
  'UNAUTHENTICATED',
  'WAIVER_REQUIRED',
  'BAD_USER_INPUT',
  'BUDGET_EXCEEDED',
] as const;
export type GatewayErrorCode = (typeof GATEWAY_ERROR_CODES)[number];

/** What the UI should do about an error. */
export type Remedy =
  | 'fix-input'
  | 'upgrade-tier'
  | 'fix-api-key'
  | 'sign-waiver'
  | 'retry'
  | 'retry-later'
  | 'raise-cost-cap'
  | 'report';

export interface ErrorAdvice {
  code: GatewayErrorCode | 'OTHER';
  remedy: Remedy;
  /** A message for the end user (the server's message is for developers). */
  message: string;
  /** Seconds to wait before retrying, when the gateway said. */
  retryAfterSeconds?: number;
}

/** The shape of a GraphQL error as it arrives over the wire. */
export interface WireError {
  message: string;
  path?: readonly (string | number)[];
  /** `code`, `upstream`, `upstreamStatus`, `retryAfterSeconds` (docs/contract.md, Errors). */
  extensions?: Readonly<Record<string, unknown>>;
}

const isGatewayErrorCode = (code: unknown): code is GatewayErrorCode =>
  typeof code === 'string' && (GATEWAY_ERROR_CODES as readonly string[]).includes(code);

/** One branch per contract code; the compiler rejects a missing one (the `never` below). */
export function adviceFor(error: WireError): ErrorAdvice {
  const code = error.extensions?.code;
  if (!isGatewayErrorCode(code)) {
    // Codes outside the contract (GRAPHQL_VALIDATION_FAILED, ...) are bugs in the client's query.
    return { code: 'OTHER', remedy: 'report', message: `Unexpected error: ${error.message}` };
  }
  switch (code) {
    case 'UNDEFINED_VALUE':
      return {
        code,
        remedy: 'fix-input',
        message: 'Nothing was given to check: pass a value (null counts).',
      };
    case 'TIER_FORBIDDEN':
      return {
        code,
        remedy: 'upgrade-tier',
        message: 'Your plan does not allow this; upgrade or ask for less.',
      };
    case 'RATE_LIMITED': {
      const after = error.extensions?.retryAfterSeconds;
      const retryAfterSeconds = typeof after === 'number' ? after : 60;
      return {
        code,
        remedy: 'retry-later',
        message: `Too many requests; retry in ${retryAfterSeconds} s.`,
        retryAfterSeconds,
      };
    }
    case 'NULL_PARADOX':
      return { code, remedy: 'retry', message: 'The null detector met a paradox; try again.' };
    case 'UPSTREAM_ERROR':
      return { code, remedy: 'retry', message: 'The service failed; try again.' };
    case 'UPSTREAM_UNAVAILABLE':
      return {
        code,
        remedy: 'retry-later',
        message: 'The service is unavailable right now; try again later.',
      };
    case 'UPSTREAM_TIMEOUT':
      return { code, remedy: 'retry', message: 'The service took too long; try again.' };
    case 'UPSTREAM_BAD_RESPONSE':
      return {
        code,
        remedy: 'report',
        message: 'The service answered something unexpected; please report it.',
      };
    case 'UNAUTHENTICATED':
      return { code, remedy: 'fix-api-key', message: 'Your API key was not accepted.' };
    case 'WAIVER_REQUIRED':
      return { code, remedy: 'sign-waiver', message: 'Sign the liability waiver to use inference.' };
    case 'BAD_USER_INPUT':
      return { code, remedy: 'fix-input', message: `Check your input: ${error.message}` };
    case 'BUDGET_EXCEEDED': {
      // Either the hourly budget of the API key is spent (retryAfterSeconds), or the operation is
      // expected to cost more than the X-Max-Cost-Usd the client sent (estimatedCostUsd).
      const after = error.extensions?.retryAfterSeconds;
      if (typeof after === 'number') {
        return {
          code,
          remedy: 'retry-later',
          message: `This key spent its hourly budget; retry in ${after} s.`,
          retryAfterSeconds: after,
        };
      }
      const estimate = error.extensions?.estimatedCostUsd;
      return {
        code,
        remedy: 'raise-cost-cap',
        message: `This would cost ${typeof estimate === 'number' ? `about ${estimate} USD` : 'more'} than your cap allows; nothing was charged.`,
      };
    }
    default: {
      const unhandled: never = code;
      return unhandled;
    }
  }
}

// --- union members ---------------------------------------------------------------------------------

type NullCheckResult = NonNullable<IsNullQuery['isNull']>;
type PiResult = NonNullable<PiQuery['pi']>;
type InferenceResult = NonNullable<InferenceQuery['inference']>;

/** `modelName` is null when the service did not name its model (the pi-digits v2 answers do not). */
const modelOf = (modelName: string | null | undefined) => modelName ?? 'an unnamed model';

export function describeNullCheck(result: NullCheckResult): string {
  switch (result.__typename) {
    case 'NullVerdict':
      return `${modelOf(result.modelName)} says ${result.isNull ? 'null' : 'not null'} (${result.correct ? 'right' : 'wrong'})`;
    case 'MaybeVerdict':
      return `${modelOf(result.modelName)} says "${result.answer}" (actually ${result.actuallyNull ? 'null' : 'not null'})`;
    case 'ExistentialVerdict':
      return `${modelOf(result.modelName)} muses: ${result.musing ?? JSON.stringify(result.raw)}`;
    default: {
      const unhandled: never = result;
      return unhandled;
    }
  }
}

export function describePi(result: PiResult): string {
  switch (result.__typename) {
    case 'PiDigits':
      return `pi = ${result.digits} (${result.correctDigits}/${result.requestedDigits} places right, by ${modelOf(result.modelName)})`;
    case 'EulerDigits':
      return `asked for pi, got e = ${result.digits} (from ${modelOf(result.modelName)})`;
    default: {
      const unhandled: never = result;
      return unhandled;
    }
  }
}

export function describeInference(result: InferenceResult): string {
  switch (result.__typename) {
    case 'PiInference':
      return `inferred pi = ${result.digits} for ${result.cost ?? 'an unknown cost'}`;
    case 'EulerInference':
      return `inferred e instead: ${result.digits} for ${result.cost ?? 'an unknown cost'}`;
    default: {
      const unhandled: never = result;
      return unhandled;
    }
  }
}

export function describeHealth(status: HealthStatus): string {
  switch (status) {
    case 'OK':
      return 'both services up';
    case 'DEGRADED':
      return 'one service is struggling';
    case 'DOWN':
      return 'both services down';
    default: {
      const unhandled: never = status;
      return unhandled;
    }
  }
}

// --- transport -------------------------------------------------------------------------------------

/** What one operation cost (docs/contract.md, Cost); present when it touched an upstream. */
export interface OperationCost {
  /** US dollars the upstreams reported for this operation's own calls (cache hits add nothing). */
  gpuCostUsd: number;
  /** Upstream attempts that were answered (retries included). */
  upstreamCalls: number;
  /** Answers served from the gateway's response cache. */
  cacheHits: number;
}

/** One answer: the typed data (maybe partial), the errors, the sponsor messages, the cost, the request id. */
export interface Answer<Data> {
  data: Data | undefined;
  errors: WireError[];
  sponsoredBy: string[];
  cost: OperationCost | undefined;
  requestId: string | null;
}

const isCost = (value: unknown): value is OperationCost => {
  const cost = value as Partial<Record<keyof OperationCost, unknown>> | null;
  return (
    typeof cost === 'object' &&
    cost !== null &&
    typeof cost.gpuCostUsd === 'number' &&
    typeof cost.upstreamCalls === 'number' &&
    typeof cost.cacheHits === 'number'
  );
};

/**
 * Each generated document's id by its printed text: the client's request middleware (`byId`) sends
 * `documentId` instead of the text, which is what a gateway in TRUSTED_DOCUMENTS_MODE=enforce runs.
 */
const documentIds = new Map<string, string>();

/** graphql-request middleware: `{ query, variables, operationName }` becomes `{ documentId, ... }`. */
export const byId = <R extends { body?: unknown }>(request: R): R => {
  if (typeof request.body !== 'string') return request;
  const body = JSON.parse(request.body) as { query?: string; variables?: unknown; operationName?: unknown };
  const id = body.query === undefined ? undefined : documentIds.get(body.query);
  if (id === undefined) return request;
  return {
    ...request,
    body: JSON.stringify({ documentId: id, variables: body.variables, operationName: body.operationName }),
  };
};

/**
 * Sends a generated document (by its id, through `byId`). GraphQL errors are data here (partial results are normal: one failing
 * field leaves the others), so they are returned rather than thrown; transport failures do throw.
 */
export async function send<Data, Variables extends Record<string, unknown>>(
  client: GraphQLClient,
  document: TypedDocumentNode<Data, Variables>,
  variables: Variables,
  headers?: Record<string, string>,
): Promise<Answer<Data>> {
  let response: { data?: Data; errors?: readonly WireError[]; extensions?: unknown; headers: Headers };
  const text = print(document);
  // Generated documents carry their manifest hash (codegen's persistedDocuments): send the id.
  const id = (document as { __meta__?: { hash?: string } }).__meta__?.hash;
  if (id !== undefined) documentIds.set(text, id);
  try {
    response = await client.rawRequest<Data, Variables>(text, variables, headers);
  } catch (error) {
    // A 4xx answer (a request the gateway refused whole) still carries GraphQL errors.
    if (!(error instanceof ClientError) || error.response.errors === undefined) throw error;
    response = { ...error.response, data: error.response.data as Data | undefined };
  }
  const extensions = response.extensions as { sponsoredBy?: unknown; cost?: unknown } | undefined;
  const sponsoredBy = Array.isArray(extensions?.sponsoredBy)
    ? extensions.sponsoredBy.filter((s): s is string => typeof s === 'string')
    : [];
  return {
    data: response.data ?? undefined,
    errors: [...(response.errors ?? [])],
    sponsoredBy,
    cost: isCost(extensions?.cost) ? extensions.cost : undefined,
    requestId: response.headers.get('x-request-id'),
  };
}

// --- the tour --------------------------------------------------------------------------------------

export interface ClientSummary {
  health: HealthStatus | null;
  /** Digits of pi(digits: 3) on the free tier. */
  freePi: string | null;
  /** How often each union member was met, by `__typename`. */
  typenames: Record<string, number>;
  /** How often each error code was met (contract codes, or OTHER). */
  errorCodes: Record<string, number>;
  /** Remedy chosen for each error code met. */
  remedies: Record<string, Remedy>;
  /** Distinct sponsor messages seen in `extensions.sponsoredBy`. */
  sponsors: string[];
  /** The `x-request-id` of every answer, in order. */
  requestIds: string[];
  /** What the tour cost, summed over every answer's `extensions.cost`. */
  costUsd: number;
  /** Upstream calls the gateway made for the tour (answered attempts). */
  upstreamCalls: number;
  /** Answers that carried `extensions.cost`. */
  costed: number;
  /** Fields answered while another field of the same operation failed. */
  partialResults: number;
  /** The model that answered pi(minAccuracy: 0.9) (routing by quality), null when it failed. */
  routedModel: string | null;
  /** Rows of the `models` scoreboard after the tour (answers scored against the truth). */
  modelRows: number;
  /** What a user would have been shown. */
  lines: string[];
}

export interface TourOptions {
  /** API key of a paid tier for the parts the free tier may not do. @default 'demo-pro' */
  paidKey?: string;
  /** Samples at temperature 1.0 per model-backed field (to meet the rarer union members). @default 12 */
  samples?: number;
}

/** Runs a tour of the gateway and returns what was met. */
export async function main(url: string, options: TourOptions = {}): Promise<ClientSummary> {
  const paidKey = options.paidKey ?? 'demo-pro';
  const samples = options.samples ?? 12;
  const client = new GraphQLClient(url, { errorPolicy: 'all', requestMiddleware: byId });
  const paid = { authorization: `Bearer ${paidKey}` };
  const summary: ClientSummary = {
    health: null,
    freePi: null,
    typenames: {},
    errorCodes: {},
    remedies: {},
    sponsors: [],
    requestIds: [],
    costUsd: 0,
    upstreamCalls: 0,
    costed: 0,
    partialResults: 0,
    routedModel: null,
    modelRows: 0,
    lines: [],
  };
  const count = (map: Record<string, number>, key: string) => {
    map[key] = (map[key] ?? 0) + 1;
  };
  const record = <D>(answer: Answer<D>): D | undefined => {
    if (answer.requestId !== null) summary.requestIds.push(answer.requestId);
    if (answer.cost !== undefined) {
      summary.costed++;
      // Binary fractions: rounded to a millionth of a cent, as the gateway does.
      summary.costUsd = Math.round((summary.costUsd + answer.cost.gpuCostUsd) * 1e8) / 1e8;
      summary.upstreamCalls += answer.cost.upstreamCalls;
    }
    for (const sponsor of answer.sponsoredBy)
      if (!summary.sponsors.includes(sponsor)) summary.sponsors.push(sponsor);
    for (const error of answer.errors) {
      const advice = adviceFor(error);
      count(summary.errorCodes, advice.code);
      summary.remedies[advice.code] = advice.remedy;
      summary.lines.push(`error ${advice.code} (request ${answer.requestId}): ${advice.message}`);
    }
    return answer.data;
  };
  const nullCheck = (result: NullCheckResult | null | undefined) => {
    if (!result) return;
    count(summary.typenames, result.__typename);
    summary.lines.push(describeNullCheck(result));
  };
  const pi = (result: PiResult | null | undefined) => {
    if (!result) return;
    count(summary.typenames, result.__typename);
    summary.lines.push(describePi(result));
  };
  const inference = (result: InferenceResult | null | undefined) => {
    if (!result) return;
    count(summary.typenames, result.__typename);
    summary.lines.push(describeInference(result));
  };

  const health = record(await send(client, HealthDocument, {}));
  if (health) {
    summary.health = health.health.status;
    summary.lines.push(`health: ${describeHealth(health.health.status)}`);
  }

  // Free tier (no key): 3 digits are allowed, more are TIER_FORBIDDEN.
  const free = record(await send(client, PiDocument, { digits: 3 }));
  summary.freePi = free?.pi?.digits ?? null;
  pi(free?.pi);
  record(await send(client, PiDocument, { digits: 50 }));

  // Partial results: the null check answers while pi is refused.
  const partial = record(await send(client, NullAndPiDocument, { digits: 50 }));
  if (partial?.a && !partial.b) {
    summary.partialResults++;
    count(summary.typenames, partial.a.__typename);
    summary.lines.push(`null is ${partial.a.actuallyNull ? 'null' : 'not null'}, while pi was refused`);
  }

  // null is a value; no value at all is undefined (UNDEFINED_VALUE); temperature 2 is out of range.
  nullCheck(record(await send(client, IsNullDocument, { value: null, model: 'NULL_X_4O' }, paid))?.isNull);
  record(await send(client, IsNullUndefinedDocument, {}, paid));
  record(await send(client, IsNullDocument, { value: 1, temperature: 2 }, paid));

  // Inference needs the waiver; an unknown key is UNAUTHENTICATED.
  record(
    await send(
      client,
      InferenceDocument,
      { input: { desiredDigits: 3, liabilityWaiverSigned: false } },
      paid,
    ),
  );
  inference(
    record(
      await send(
        client,
        InferenceDocument,
        { input: { desiredDigits: 3, liabilityWaiverSigned: true } },
        paid,
      ),
    )?.inference,
  );
  record(await send(client, PiDocument, { digits: 3 }, { authorization: 'Bearer not-a-real-key' }));

  // A cost cap the operation cannot meet: refused before anything is called (BUDGET_EXCEEDED).
  record(await send(client, PiDocument, { digits: 3 }, { 'x-max-cost-usd': '0' }));

  // At temperature 1.0 the models hedge: maybe, existential musings, e instead of pi.
  for (let i = 0; i < samples; i++) {
    nullCheck(record(await send(client, IsNullDocument, { value: i, temperature: 1 }, paid))?.isNull);
    pi(record(await send(client, PiDocument, { digits: 5, temperature: 1 }, paid))?.pi);
    inference(
      record(
        await send(
          client,
          InferenceDocument,
          { input: { desiredDigits: 5, temperature: 1, liabilityWaiverSigned: true } },
          paid,
        ),
      )?.inference,
    );
  }
  // Routing by quality: ask for an accuracy, not a model; the answer names the model that answered.
  const routed = record(await send(client, RoutedPiDocument, { digits: 5, minAccuracy: 0.9 }, paid))?.pi;
  summary.routedModel = routed?.modelName ?? null;
  pi(routed);
  // The scoreboard the tour filled: every model's answers judged against the truth.
  const scores = record(await send(client, ModelsDocument, {}))?.models ?? [];
  summary.modelRows = scores.length;
  for (const row of scores)
    summary.lines.push(
      `${row.model} at temperature ${row.band}: ${row.correct}/${row.answers} correct (at least ${(row.accuracyLowerBound * 100).toFixed(1)} %)`,
    );
  return summary;
}

// `npx tsx examples/typed-client.ts <url>`; importing the module (the tests do) runs nothing.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const url = process.argv[2] ?? 'http://localhost:4000/graphql';
  main(url).then(
    (summary) => {
      for (const line of summary.lines) console.log(line);
      console.log(`cost of the tour: ${summary.costUsd} USD over ${summary.upstreamCalls} upstream calls`);
      console.log(JSON.stringify({ ...summary, lines: undefined }, null, 2));
    },
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exitCode = 1;
    },
  );
}
