/**
 * Degrade before refusing (docs/contract.md, Cost): with `X-Budget-Fallback: cheaper-model`, a field
 * whose model does not fit what is left of the budget (or the X-Max-Cost-Usd cap) is answered by the
 * next cheaper model of its service that fits, and the answer says so; without the header it is
 * refused as before, calling nothing.
 */
import { describe, expect, it } from 'vitest';
import { gql } from '../support/graphql-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody } from '../support/upstream-bodies.js';

const scripted = useScriptedGateways();
const OPUS =
  'query Dear { dear: isNull(value: 1, model: NULL_X_OPUS) { __typename ... on NullCheck { model modelName } } }';

/** The scripted null-check service answers with the model it was asked for, at its list price. */
function answerWithRequestedModel() {
  scripted.upstream.route('POST', '/api/v1/check', (request) => {
    const model = ((request.body as { model?: string }).model ?? 'null-x-4o') as string;
    const price: Record<string, number> = {
      'null-x-opus': 0.042,
      'null-x-4o': 0.0042,
      'null-x-mini': 0.0006,
    };
    return { body: nullBody({ model, gpu_cost_usd: price[model] }) };
  });
}

describe('X-Budget-Fallback: cheaper-model', () => {
  it('an opus check on a nearly spent budget is answered by a cheaper model, and says so; without the header it is refused', async () => {
    answerWithRequestedModel();
    // 0.01 an hour: opus (0.042) never fits; 4o (0.0042) does.
    const g = await scripted.gateway({ COST_BUDGETS: JSON.stringify({ default: { '1h': 0.01 } }) });
    const key = { authorization: 'Bearer sk-fallback' };

    const refused = await gql(g.url, OPUS, { headers: key });
    expect(refused.errors?.[0]?.extensions?.code).toBe('BUDGET_EXCEEDED');
    expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(0);

    const degraded = await gql(g.url, OPUS, { headers: { ...key, 'x-budget-fallback': 'cheaper-model' } });
    expect(degraded.errors).toBeUndefined();
    // The answer names the model that answered, and the bill lists the fallback.
    expect(degraded.data).toEqual({
      dear: { __typename: 'NullVerdict', model: 'NULL_X_4O', modelName: 'null-x-4o' },
    });
    expect(degraded.extensions?.cost).toMatchObject({
      gpuCostUsd: 0.0042,
      fallbacks: [{ path: 'dear', requestedModel: 'null-x-opus', usedModel: 'null-x-4o' }],
    });
    expect((scripted.upstream.requests.at(-1)?.body as { model?: string } | undefined)?.model).toBe(
      'null-x-4o',
    );

    // 0.0058 left: 4o fits once more, then only mini does.
    const second = await gql(g.url, OPUS, { headers: { ...key, 'x-budget-fallback': 'cheaper-model' } });
    expect(second.extensions?.cost).toMatchObject({ fallbacks: [{ usedModel: 'null-x-4o' }] });
    const third = await gql(g.url, OPUS, { headers: { ...key, 'x-budget-fallback': 'cheaper-model' } });
    expect(third.extensions?.cost).toMatchObject({ fallbacks: [{ usedModel: 'null-x-mini' }] });
  });

  it('falls back under the X-Max-Cost-Usd cap too; `none` declines it where the setting makes it the default', async () => {
    answerWithRequestedModel();
    const g = await scripted.gateway({ COST_BUDGET_FALLBACK: 'cheaper-model' });
    const capped = await gql(g.url, OPUS, { headers: { 'x-max-cost-usd': '0.001' } });
    expect(capped.errors).toBeUndefined();
    expect(capped.extensions?.cost).toMatchObject({
      fallbacks: [{ path: 'dear', requestedModel: 'null-x-opus', usedModel: 'null-x-mini' }],
    });
    const declined = await gql(g.url, OPUS, {
      headers: { 'x-max-cost-usd': '0.001', 'x-budget-fallback': 'none' },
    });
    expect(declined.errors?.[0]?.extensions).toMatchObject({ code: 'BUDGET_EXCEEDED', maxCostUsd: 0.001 });
  });

  it('nothing cheaper fits: the refusal stands', async () => {
    answerWithRequestedModel();
    const g = await scripted.gateway();
    const result = await gql(g.url, OPUS, {
      headers: { 'x-max-cost-usd': '0.0001', 'x-budget-fallback': 'cheaper-model' },
    });
    expect(result.errors?.[0]?.extensions?.code).toBe('BUDGET_EXCEEDED');
  });
});
