/**
 * Trusted documents and persisted queries (docs/contract.md, Trusted documents and persisted queries),
 * one set of rules for both request paths.
 *
 * - The manifest (TRUSTED_DOCUMENTS): the GraphQL Code Generator client preset's
 *   `persisted-documents.json`, `{ "<sha256 hex>": "<document>" }`. Checked whole at start
 *   (`loadManifest`): a hash that is not its document's sha256, a document that does not parse or
 *   validate, stops the start with one line naming the entry.
 * - A request names a document by `documentId` (`sha256:<hex>` or the bare hex), or in Apollo's APQ
 *   form (`extensions.persistedQuery: { version: 1, sha256Hash }`, with or without the text).
 * - Modes: `off` (any operation runs), `log` (any operation runs; a document outside the manifest is
 *   counted in gateway_untrusted_operations_total and logged once), `enforce` (manifest documents
 *   only, by id or identical text; anything else is PERSISTED_QUERY_NOT_IN_LIST and calls nothing).
 *   Introspection-only documents (GraphiQL's schema, a codegen run) are allowed in `enforce` while
 *   INTROSPECTION is on: they call no upstream and reveal only the published schema.
 * - APQ (off and log): an unknown hash without text is PERSISTED_QUERY_NOT_FOUND (message
 *   `PersistedQueryNotFound`, which Apollo Client's and urql's links answer by sending the text);
 *   a hash with its text (after checking the hash: a wrong one is BAD_USER_INPUT) is registered in the
 *   shared answer store (memory, or Redis for every replica) only once the document has parsed and
 *   passed validation, as Apollo Server does: `resolve` names the hash to register, and the request
 *   pipeline calls `register` at admission (request/pipeline.ts). In enforce mode nothing registers.
 *
 * `resolve` returns the document text to run (synchronously for the manifest and memory: the fast path
 * stays synchronous) or the refusal. The pipeline resolves each operation once, whichever lane serves
 * it, so log mode counts where it resolves.
 */

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type DocumentNode, type GraphQLError, Kind, parse } from 'graphql';
import type { Logger } from 'pino';
import { isPromise } from '../../shared/is-promise.js';
import { gatewayError } from '../errors.js';
import type { AnswerStore } from '../shared-state/types.js';

export type TrustedDocumentsMode = 'off' | 'log' | 'enforce';

/** id (sha256 hex) → document text. */
export type Manifest = ReadonlyMap<string, string>;

const SHA256_HEX = /^[0-9a-f]{64}$/;
/** How long a registered APQ document is kept. */
const APQ_TTL_MS = 24 * 60 * 60 * 1000;
/** Distinct untrusted documents remembered as logged (then each is logged again at most once more per 10k). */
const MAX_LOGGED = 10_000;

export const sha256Hex = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * Reads and checks a manifest; throws an Error whose message is one line naming the file and the
 * entry. `validate` gives the document's validation errors (the schema's and every plugin's rules).
 */
export function loadManifest(
  file: string,
  validate: (document: DocumentNode) => readonly { message: string }[],
): Manifest {
  const fail = (why: string) => new Error(`TRUSTED_DOCUMENTS=${file}: ${why}`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw fail(
      error instanceof SyntaxError
        ? `not JSON (${error.message})`
        : `cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
    );
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw fail('not a JSON object of "<sha256 hex>": "<document>" entries');
  const manifest = new Map<string, string>();
  for (const [key, text] of Object.entries(json)) {
    // The client preset writes `sha256:<hex>` keys with `hashAlgorithm: 'sha256'`; bare hex is the other form.
    const id = key.startsWith('sha256:') ? key.slice(7) : key;
    const short = `${id.slice(0, 12)}…`;
    if (typeof text !== 'string') throw fail(`entry ${short}: the document is not a string`);
    if (!SHA256_HEX.test(id)) throw fail(`entry ${short}: the key is not a sha256 hex digest`);
    if (sha256Hex(text) !== id) throw fail(`entry ${short}: the key is not the sha256 of its document`);
    let document: DocumentNode;
    try {
      document = parse(text);
    } catch (error) {
      throw fail(`entry ${short}: the document does not parse (${(error as Error).message})`);
    }
    const errors = validate(document);
    if (errors.length > 0)
      throw fail(`entry ${short}: the document is not valid here (${errors[0]?.message})`);
    manifest.set(id, text);
  }
  return manifest;
}

/** The mode in effect: as set, else `log` with a manifest and `off` without; enforce needs a manifest. */
export function trustedMode(
  file: string | undefined,
  mode: TrustedDocumentsMode | undefined,
): TrustedDocumentsMode {
  if (mode === 'enforce' && file === undefined)
    throw new Error('TRUSTED_DOCUMENTS_MODE=enforce needs TRUSTED_DOCUMENTS (the manifest to enforce)');
  return mode ?? (file === undefined ? 'off' : 'log');
}

export interface TrustedDocumentsOptions {
  mode: TrustedDocumentsMode;
  manifest?: Manifest | undefined;
  /** Where APQ documents are registered (shared state's `documents` store: memory, or Redis for every replica). */
  store: AnswerStore;
  /** INTROSPECTION: introspection-only documents pass in enforce mode. @default true */
  introspection?: boolean;
  /** APQ: whether APQ documents register (off and log modes). @default true */
  apq?: boolean;
  /** Told of each operation whose document is not in the manifest, in log mode. */
  onUntrusted?: (() => void) | undefined;
  logger: Logger;
}

/** What a request sent: its query text, documentId, and extensions. */
export interface DocumentRequest {
  query?: unknown;
  documentId?: unknown;
  extensions?: unknown;
}

export type Resolved =
  | {
      query: string;
      id: string | undefined;
      /** An APQ hash sent with its text: registered once the document passed validation. */
      register?: string | undefined;
    }
  | GraphQLError;

export interface TrustedDocuments {
  readonly mode: TrustedDocumentsMode;
  /**
   * The text to run, or the refusal (a promise only when an APQ hash is looked up in Redis). In log
   * mode a text outside the manifest is counted, and logged once per document, here.
   */
  resolve(request: DocumentRequest): Resolved | Promise<Resolved>;
  /**
   * Registers an APQ document (its hash checked by `resolve`) that passed validation, counted against
   * `owner` (the client: APQ_MAX_DOCUMENTS_PER_CLIENT).
   */
  register(hash: string, text: string, owner: string): void;
  /** The manifest's documents (GraphiQL's tabs in enforce mode). */
  readonly documents: readonly string[];
}

const notFound = () =>
  gatewayError('PERSISTED_QUERY_NOT_FOUND', 'PersistedQueryNotFound', { http: { status: 404 } });
const notInList = (what: string) =>
  gatewayError(
    'PERSISTED_QUERY_NOT_IN_LIST',
    `${what} is not in this gateway's trusted documents (TRUSTED_DOCUMENTS_MODE=enforce): only the documents of its manifest run.`,
    { http: { status: 403 } },
  );
const badInput = (message: string) => gatewayError('BAD_USER_INPUT', message, { http: { status: 400 } });

/** A document of introspection fields only (`__schema`, `__type`, `__typename`), fragments allowed. */
function introspectionOnly(text: string): boolean {
  let document: DocumentNode;
  try {
    document = parse(text, { noLocation: true });
  } catch {
    return false;
  }
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    for (const selection of definition.selectionSet.selections) {
      if (selection.kind !== Kind.FIELD || !selection.name.value.startsWith('__')) return false;
    }
  }
  return true;
}

export function createTrustedDocuments(options: TrustedDocumentsOptions): TrustedDocuments {
  const { mode, store, logger } = options;
  const manifest = options.manifest ?? new Map<string, string>();
  const texts = new Set(manifest.values());
  const introspection = options.introspection ?? true;
  const apq = options.apq ?? true;
  const logged = new Set<string>();

  /** log mode: an operation outside the manifest, counted; its document logged once. */
  const untrusted = (text: string) => {
    options.onUntrusted?.();
    const id = sha256Hex(text);
    if (logged.has(id)) return;
    if (logged.size >= MAX_LOGGED) logged.clear();
    logged.add(id);
    logger.warn(
      { documentId: `sha256:${id}`, document: text.length > 2000 ? `${text.slice(0, 2000)}…` : text },
      'operation outside the trusted documents (TRUSTED_DOCUMENTS_MODE=log)',
    );
  };

  /** A text sent in full: enforce checks it, log counts it. */
  const checkText = (text: string, id: string | undefined): Resolved => {
    if (mode === 'off' || texts.has(text)) return { query: text, id };
    if (mode === 'log') {
      untrusted(text);
      return { query: text, id };
    }
    if (introspection && introspectionOnly(text)) return { query: text, id };
    return notInList('This document');
  };

  const byHash = (hash: string, text: string | undefined): Resolved | Promise<Resolved> => {
    const known = manifest.get(hash);
    if (known !== undefined) return { query: known, id: hash };
    if (text !== undefined) {
      if (sha256Hex(text) !== hash) return badInput('provided sha does not match query');
      const resolved = checkText(text, hash);
      if (mode === 'enforce' || !apq || resolved instanceof Error) return resolved;
      return { ...resolved, register: hash };
    }
    if (mode === 'enforce') return notInList(`Document sha256:${hash}`);
    if (!apq) return notFound();
    const found = store.get(hash);
    const answer = (value: unknown): Resolved =>
      typeof value === 'string' ? checkText(value, hash) : notFound();
    return isPromise(found) ? found.then(answer) : answer(found);
  };

  return {
    mode,
    documents: [...texts],
    register(hash, text, owner) {
      if (mode !== 'enforce' && apq) store.set(hash, text, APQ_TTL_MS, text.length * 2, owner);
    },
    resolve(request) {
      const text = typeof request.query === 'string' && request.query !== '' ? request.query : undefined;
      if (request.documentId !== undefined && request.documentId !== null) {
        const raw = request.documentId;
        const hash =
          typeof raw === 'string' ? (raw.startsWith('sha256:') ? raw.slice(7) : raw).toLowerCase() : '';
        if (!SHA256_HEX.test(hash))
          return badInput(
            'documentId must be "sha256:" followed by 64 hex digits, or the 64 hex digits alone',
          );
        return byHash(hash, text);
      }
      const persisted = (request.extensions as { persistedQuery?: unknown } | undefined)?.persistedQuery;
      if (persisted !== undefined) {
        const { version, sha256Hash } = (persisted ?? {}) as { version?: unknown; sha256Hash?: unknown };
        if (version !== 1) return badInput('extensions.persistedQuery.version must be 1');
        if (typeof sha256Hash !== 'string' || !SHA256_HEX.test(sha256Hash.toLowerCase()))
          return badInput('extensions.persistedQuery.sha256Hash must be 64 hex digits');
        return byHash(sha256Hash.toLowerCase(), text);
      }
      if (text === undefined) return { query: '', id: undefined };
      return checkText(text, undefined);
    },
  };
}
