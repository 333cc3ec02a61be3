/**
 * GraphQL Code Generator: typed documents (TypedDocumentNode) for the project's own operations in
 * test/operations/, generated from the committed schema.graphql into generated/client/. The
 * integration tests use them, so a schema change that breaks a client breaks the typecheck. It also
 * writes generated/client/persisted-documents.json, the trusted-documents manifest of those
 * operations (TRUSTED_DOCUMENTS).
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
  },
};

export default config;
