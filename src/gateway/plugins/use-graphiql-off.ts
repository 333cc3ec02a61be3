/**
 * GRAPHIQL=false: a browser that asks for GraphiQL gets a short page saying that it is off here,
 * instead of a bare 406 (a browser's GET of /graphql has no query to run). The API itself still
 * answers every GraphQL request.
 */
import type { Plugin } from 'graphql-yoga';

export interface GraphiQLOffPluginOptions {
  /** @default '/graphql' */
  endpoint?: string;
}

const PAGE = `<!doctype html>
<html lang="en">
  <head><meta charset="utf-8" /><title>GraphiQL is off</title></head>
  <body>
    <h1>GraphiQL is off on this gateway</h1>
    <p>The operator turned the in-browser IDE off (GRAPHIQL=false). The GraphQL API itself answers
    POST and GET requests at this address; its schema is published as schema.graphql.</p>
  </body>
</html>
`;

export function useGraphiQLOff(options: GraphiQLOffPluginOptions = {}): Plugin {
  const endpoint = options.endpoint ?? '/graphql';
  return {
    onRequest({ request, url, endResponse, fetchAPI }) {
      if (request.method !== 'GET' && request.method !== 'HEAD') return;
      if (url.pathname !== endpoint && url.pathname !== `${endpoint}/`) return;
      // A browser navigating here: HTML accepted, and no GraphQL parameters to run.
      if (!request.headers.get('accept')?.includes('text/html') || url.searchParams.has('query')) return;
      endResponse(
        new fetchAPI.Response(request.method === 'HEAD' ? null : PAGE, {
          status: 200,
          headers: {
            'content-type': 'text/html; charset=utf-8',
            'cache-control': 'no-store',
            'content-security-policy': "default-src 'none'",
          },
        }),
      );
    },
  };
}
