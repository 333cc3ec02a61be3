/** GET /metrics: every metric of this gateway in Prometheus text format. */
import type { Plugin } from 'graphql-yoga';
import type { GatewayMetrics } from '../observability/metrics.js';

export interface MetricsEndpointPluginOptions {
  metrics: GatewayMetrics;
  /** @default '/metrics' */
  path?: string;
}

export function useMetricsEndpoint(options: MetricsEndpointPluginOptions): Plugin {
  const { metrics } = options;
  const path = options.path ?? '/metrics';
  return {
    onRequest({ request, url, endResponse, fetchAPI }) {
      // Cheap test first: a POST never parses the URL here.
      if (request.method !== 'GET' || url.pathname !== path) return;
      return metrics.render().then((text) => {
        endResponse(
          new fetchAPI.Response(text, {
            status: 200,
            headers: { 'content-type': metrics.contentType, 'cache-control': 'no-store' },
          }),
        );
      });
    },
  };
}
