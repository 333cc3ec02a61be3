/**
 * GraphQL Code Generator: typed documents (TypedDocumentNode) for the project's own operations in
 * test/operations/, generated from the committed schema.graphql into generated/client/. The
 * integration tests use them, so a schema change that breaks a client breaks the typecheck. It also
 * writes generated/client/persisted-documents.json, the trusted-documents manifest of those
 * operations (TRUSTED_DOCUMENTS), and generated/client/possible-types.ts, the fragment matcher Apollo
 * Client's InMemoryCache needs to read fields through the schema's unions and interfaces.
 */
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  schema: 'schema.graphql',
  documents: ['test/operations/*.graphql'],
  ignoreNoDocuments: false,
  generates: {
    'generated/client/': {
      preset: 'client',
      presetConfig: {
        fragmentMasking: false,
        // persisted-documents.json: the trusted-documents manifest (docs/contract.md, Trusted
        // documents and persisted queries), sha256 of each document's text; each generated document
        // carries its hash (`__meta__.hash`) to send as `documentId`.
        persistedDocuments: { hashAlgorithm: 'sha256' },
      },
      config: {
        // The JSON scalar is any JSON value.
        scalars: { JSON: 'unknown' },
        enumsAsTypes: true,
        useTypeImports: true,
        // NodeNext resolution needs `.js` on relative imports.
        emitLegacyCommonJSImports: false,
      },
    },
    // Every union and interface of the schema with its possible types, in the shape of Apollo Client
    // 3 and 4's `new InMemoryCache({ possibleTypes })`. Without it the cache cannot tell that a
    // PiDigits is a ConstantDigits and drops the fields of `... on ConstantDigits { digits }`.
    'generated/client/possible-types.ts': {
      plugins: ['fragment-matcher'],
      config: {
        apolloClientVersion: 3, // the shape of `possibleTypes` in Apollo Client 3 and 4
        useExplicitTyping: true, // literal types, exact member names in the IDE
        deterministic: true, // sorted: the same schema gives the same file
      },
    },
  },
};

export default config;
