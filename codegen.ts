/**
 * GraphQL Code Generator: typed documents (TypedDocumentNode) for the project's own operations in
 * test/operations/, generated from the committed schema.graphql into generated/client/. The
 * integration tests use them, so a schema change that breaks a client breaks the typecheck.
 */
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  schema: 'schema.graphql',
  documents: ['test/operations/*.graphql'],
  ignoreNoDocuments: false,
  generates: {
    'generated/client/': {
      preset: 'client',
      presetConfig: { fragmentMasking: false },
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
