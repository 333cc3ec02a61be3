/**
 * Incremental delivery (docs/contract.md, Delivery to frontends): `@defer` through Yoga's defer-stream
 * plugin, over multipart/mixed and text/event-stream, in front of a scripted upstream whose pi answer
 * is held until the test releases it. The first part arrives while the deferred field's upstream call
 * is still held; the last part's `extensions.cost` is the whole operation's bill; Apollo Client 4 and
 * urql consume it unchanged; a client that leaves mid-stream aborts the call in flight, starts no
 * other, and its key is billed the answered calls plus the estimate of the abandoned one.
 */
import { ApolloClient, gql as apolloGql, HttpLink, InMemoryCache } from '@apollo/client';
import { Defer20220824Handler } from '@apollo/client/incremental';
import { Client, fetchExchange, gql as urqlGql } from '@urql/core';
import { beforeEach, describe, expect, it } from 'vitest';
import { createCostModel } from '../../src/gateway/cost/cost-model.js';
import type { TestGateway } from '../support/gateway.js';
import { metricValue } from '../support/metric-values.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, piBody } from '../support/upstream-bodies.js';
import { type Gate, gate, until, within } from '../support/waits.js';

const scripted = useScriptedGateways();
const QUERY =
  'query Later { isNull(value: 1) { __typename } ... @defer { pi(digits: 3) { ... on ConstantDigits { digits } } } }';
const NULL_COST = 0.001;
const PI_COST = 0.002;

let held: Gate;
beforeEach(() => {
  held = gate();
  scripted.upstream.reset();
  scripted.upstream.route('POST', '/api/v1/check', { body: nullBody({ gpu_cost_usd: NULL_COST }) });
  scripted.upstream.route('GET', '/api/v1/pi', {
    holdUntil: held.opened,
    body: piBody({ gpu_cost_usd: PI_COST }),
  });
});

const piCalls = () => scripted.upstream.count('GET', '/api/v1/pi');
const piHeld = () => until(() => piCalls() === 1);

/** Reads a streamed answer part by part: `next()` resolves with the text received so far once it grows. */
function reader(response: Response) {
  const stream = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  return {
    get text() {
      return text;
    },
    async until(check: (text: string) => boolean): Promise<boolean> {
      while (!check(text)) {
        const chunk = await within(stream.read(), 10_000);
        if (typeof chunk !== 'object' || chunk.done) return check(text);
        text += decoder.decode(chunk.value, { stream: true });
      }
      return true;
    },
    cancel: () => stream.cancel(),
  };
}

/** The JSON parts of a multipart/mixed or text/event-stream body. */
const partsOf = (text: string): Array<Record<string, unknown>> =>
  [...text.matchAll(/^(?:data: )?(\{.*\})\s*$/gm)].map((m) => JSON.parse(m[1] as string));

/** gateway_gpu_cost_usd_total over every upstream and model. */
async function totalCost(g: TestGateway): Promise<number> {
  const metric = (await g.app.metrics.registry.getMetricsAsJSON()).find(
    (m) => m.name === 'gateway_gpu_cost_usd_total',
  );
  return (metric?.values ?? []).reduce((sum, series) => sum + series.value, 0);
}

const post = (g: TestGateway, accept: string, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(g.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept, ...headers },
    body: JSON.stringify({ query: QUERY }),
    signal,
  });

describe.each([
  ['multipart/mixed', 'multipart/mixed'],
  ['text/event-stream', 'text/event-stream'],
])('@defer over %s', (_name, accept) => {
  it('answers the first part while the deferred call is held; the last part bills the whole operation', async () => {
    const g = await scripted.gateway();
    const costBefore = await totalCost(g);
    const response = await post(g, accept);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(new RegExp(`^${accept}`));
    // No compression holds a stream back (Yoga marks an event stream `none`, so proxies do not either).
    expect([null, 'none']).toContain(response.headers.get('content-encoding'));
    const body = reader(response);
    expect(await body.until((t) => partsOf(t).length >= 1)).toBe(true);
    expect(await piHeld()).toBe(true);
    // The pi call is still held: the first part came without it.
    expect(partsOf(body.text)[0]).toEqual({ data: { isNull: { __typename: 'NullVerdict' } }, hasNext: true });
    held.open();
    expect(await body.until((t) => partsOf(t).some((p) => p.hasNext === false))).toBe(true);
    const last = partsOf(body.text).find((p) => p.hasNext === false) as {
      incremental: Array<{ data: unknown }>;
      extensions: { cost: { gpuCostUsd: number; upstreamCalls: number } };
    };
    expect(last.incremental[0]?.data).toEqual({ pi: { digits: '3.141' } });
    // The bill of the whole operation, as counted in /metrics too.
    expect(last.extensions.cost).toMatchObject({ gpuCostUsd: NULL_COST + PI_COST, upstreamCalls: 2 });
    const costAfter = await totalCost(g);
    expect(Math.round((costAfter - costBefore) * 1e8) / 1e8).toBe(NULL_COST + PI_COST);
  });
});

describe('@defer with the real clients', () => {
  it('Apollo Client 4 (Defer20220824Handler) shows isNull first, then pi', async () => {
    const g = await scripted.gateway();
    const client = new ApolloClient({
      link: new HttpLink({ uri: g.url }),
      cache: new InMemoryCache(),
      incrementalHandler: new Defer20220824Handler(),
    });
    const seen: unknown[] = [];
    const subscription = client
      .watchQuery({ query: apolloGql(QUERY), fetchPolicy: 'no-cache' })
      .subscribe((result) => seen.push(result.data));
    try {
      expect(await until(() => seen.some((d) => (d as { isNull?: unknown } | undefined)?.isNull))).toBe(true);
      expect(await piHeld()).toBe(true);
      const first = seen.filter(Boolean).at(-1) as Record<string, unknown>;
      expect(first).toMatchObject({ isNull: { __typename: 'NullVerdict' } });
      expect(first.pi).toBeUndefined();
      held.open();
      expect(await until(() => seen.some((d) => (d as { pi?: unknown } | undefined)?.pi))).toBe(true);
      expect(seen.at(-1)).toMatchObject({
        isNull: { __typename: 'NullVerdict' },
        pi: { __typename: 'PiDigits', digits: '3.141' },
      });
    } finally {
      subscription.unsubscribe();
    }
  });

  it('urql shows isNull first (hasNext), then pi', async () => {
    const g = await scripted.gateway();
    const client = new Client({ url: g.url, exchanges: [fetchExchange] });
    const seen: Array<{ data?: unknown; hasNext?: boolean }> = [];
    const { unsubscribe } = client
      .query(urqlGql(QUERY), {})
      .subscribe((result) => seen.push({ data: result.data, hasNext: result.hasNext }));
    try {
      expect(await until(() => seen.length >= 1)).toBe(true);
      expect(await piHeld()).toBe(true);
      expect(seen[0]).toEqual({ data: { isNull: { __typename: 'NullVerdict' } }, hasNext: true });
      held.open();
      expect(await until(() => seen.some((r) => r.hasNext === false))).toBe(true);
      expect(seen.at(-1)?.data).toMatchObject({
        isNull: { __typename: 'NullVerdict' },
        pi: { digits: '3.141' },
      });
    } finally {
      unsubscribe();
    }
  });
});

/**
 * Reads the first part of a deferred answer, leaves (aborts) while the pi call is held, and checks
 * that the gateway gave up the held call: its socket to the upstream closed before any answer.
 */
async function leaveAfterFirstPart(response: Response, controller: AbortController): Promise<void> {
  const body = reader(response);
  expect(await body.until((t) => partsOf(t).length >= 1)).toBe(true);
  expect(await piHeld()).toBe(true);
  controller.abort();
  const call = scripted.upstream.requests.find((r) => r.path === '/api/v1/pi');
  expect(await within(call?.ended as Promise<string>, 10_000)).toBe('client-closed');
}

describe('a client that leaves mid-stream', () => {
  // Accept `multipart/mixed` alone goes straight to Yoga's handler; with a JSON type beside it the
  // fast path takes the request, reads its body and hands it over (it cannot stream @defer): both
  // lanes then watch the request, and its end (settling the abandoned call) must still happen once.
  it.each([
    ["Yoga's handler", 'multipart/mixed'],
    ['handed over by the fast path', 'multipart/mixed, application/json'],
  ])('%s: the abandoned call is counted once in /metrics', async (_lane, accept) => {
    const g = await scripted.gateway();
    const registry = g.app.metrics.registry;
    const abandonedCalls = async () =>
      (await metricValue(registry, 'gateway_upstream_calls_abandoned_total', { upstream: 'pi-digits' })) ?? 0;
    const cancelled = async () =>
      (await metricValue(registry, 'gateway_operations_total', {
        operation: 'Later',
        type: 'query',
        outcome: 'cancelled',
      })) ?? 0;
    const handedOverBefore = g.app.fastPath.served.handedOver;
    const controller = new AbortController();
    const response = await post(g, accept, {}, controller.signal);
    expect(response.headers.get('content-type')).toMatch(/^multipart\/mixed/);
    await leaveAfterFirstPart(response, controller);
    // The operation is reported (cancelled) where the stream ends, right before the request's end:
    // once it is reported, every lane that could end the request has had its turn.
    expect(await until(async () => (await cancelled()) === 1)).toBe(true);
    expect(await until(async () => (await abandonedCalls()) >= 1)).toBe(true);
    expect(await abandonedCalls()).toBe(1);
    expect(g.app.fastPath.served.handedOver - handedOverBefore).toBe(accept.includes('json') ? 1 : 0);
    held.open();
  });

  it('aborts the deferred call in flight, starts no other, and is billed as documented', async () => {
    const g = await scripted.gateway({ COST_BUDGET_USD_PER_HOUR: '1' });
    const registry = g.app.metrics.registry;
    const abandonedBefore =
      (await metricValue(registry, 'gateway_abandoned_cost_usd_total', { upstream: 'pi-digits' })) ?? 0;
    const controller = new AbortController();
    const response = await post(
      g,
      'multipart/mixed',
      { authorization: 'Bearer sk-leaves' },
      controller.signal,
    );
    await leaveAfterFirstPart(response, controller);
    // Reported as cancelled, billed the isNull answer plus the pi call's estimate (the upstream may
    // bill an abandoned call): the estimate is counted apart in /metrics.
    const cancelled = () =>
      metricValue(registry, 'gateway_operations_total', {
        operation: 'Later',
        type: 'query',
        outcome: 'cancelled',
      });
    expect(await until(async () => ((await cancelled()) ?? 0) === 1)).toBe(true);
    const piEstimate = createCostModel().expected({
      upstream: 'pi-digits',
      kind: 'pi',
      model: 'pi-x-4o',
      digits: 3,
    });
    expect(
      await until(async () => {
        const now =
          (await metricValue(registry, 'gateway_abandoned_cost_usd_total', { upstream: 'pi-digits' })) ?? 0;
        return Math.abs(now - abandonedBefore - piEstimate) < 1e-9;
      }),
    ).toBe(true);
    // The key's budget shows the same bill: the answered check plus the abandoned call's estimate.
    const seen = await fetch(g.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-leaves' },
      body: JSON.stringify({ query: '{ budget { windows { spentUsd reservedUsd } } }' }),
    });
    const budget = (
      (await seen.json()) as {
        data: { budget: { windows: Array<{ spentUsd: number; reservedUsd: number }> } };
      }
    ).data.budget.windows[0];
    expect(budget?.reservedUsd).toBe(0);
    expect(Math.abs((budget?.spentUsd ?? 0) - (NULL_COST + piEstimate))).toBeLessThan(1e-6);
    held.open();
    // No call started after the client left: still the one pi call, and one null check.
    expect(piCalls()).toBe(1);
    expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(1);
    expect(scripted.upstream.count()).toBe(2);
  });
});
