/**
 * Where the GraphQL API is served and which methods it answers (docs/contract.md, Schema and
 * Delivery to frontends): both lanes (http/yoga.ts, http/fast-path/), the QUERY method's plugin, the
 * request-shape errors' `Allow` and CORS's allowed methods read them from here.
 */

/** The GraphQL endpoint (docs/contract.md, Schema). */
export const GRAPHQL_ENDPOINT = '/graphql';

/** The methods /graphql serves (a 405's `Allow`, CORS's allowed methods). */
export const GRAPHQL_METHODS = ['GET', 'POST', 'QUERY'] as const;
