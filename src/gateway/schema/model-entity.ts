/**
 * `type Model @key(fields: "name")`: a model of one of the services as a Federation 2 entity (contract
 * §14), only in the subgraph schema (FEDERATION=true; subgraph.graphql): another subgraph that knows a
 * model's name (`"null-x-4o"`) lets a router ask this one for its price and its measured accuracy.
 * Its root is `_entities`: every representation of one request is answered by one read of the
 * scoreboard (the `modelScores` loader, one DataLoader per operation); a name no service has is null
 * for that representation alone.
 */
import { roundUsd } from '../../shared/usd.js';
import { costWeight, listPrice } from '../cost/price-table.js';
import type { UpstreamName } from '../errors.js';
import type { ModelScore as ModelScoreShape } from '../models/scoreboard.js';
import { BANDS } from '../models/scoreboard.js';
import { SERVICE_MODELS } from '../models/service-models.js';
import { checkPricing } from '../upstream/null-check-client.js';
import { piPricing } from '../upstream/pi-digits-client.js';
import { builder } from './builder.js';
import { badUserInput } from './errors.js';
import { ModelScore } from './model-scores.js';

interface ModelEntityShape {
  name: string;
  service: UpstreamName;
  bands: ModelScoreShape[];
}

/** The service of a model name, undefined for a name no service has. */
function serviceOf(name: string): UpstreamName | undefined {
  for (const [service, models] of Object.entries(SERVICE_MODELS) as [UpstreamName, readonly string[]][])
    if (models.includes(name)) return service;
  return undefined;
}

/** One call of the model at the default arguments, as the estimate prices it (pi: 3 digits). */
const defaultCall = (model: ModelEntityShape) =>
  model.service === 'null-check' ? checkPricing(model.name) : piPricing(model.name, undefined);

export const ModelEntity = builder.objectRef<ModelEntityShape>('Model').implement({
  subGraphs: ['federation'],
  description:
    'A model of the null-check or pi-digits service, keyed by its name: what it costs and how often it is right, measured against the truth (the `models` rows of this model). ' +
    "The @cost(weight:) of this subgraph's fields is in units of 0.0001 USD, rounded up: the price table's price of one call at the default arguments (the default model; pi at 3 digits), the same table the X-Max-Cost-Usd estimate starts from. The gateway still enforces the exact dollars itself.",
  fields: (t) => ({
    name: t.exposeString('name', {
      description: 'The model as its service names it, e.g. "null-x-4o" (the key).',
    }),
    service: t.exposeString('service', {
      description: 'Its service: "null-check" (isNull) or "pi-digits" (pi and inference).',
    }),
    priceUsd: t.float({
      description:
        "The price table's price of one call at the default arguments (isNull: one check; pi: 3 digits), in US dollars: what the cost estimate starts from before it has observed the model.",
      resolve: (model) => roundUsd(listPrice(defaultCall(model))),
    }),
    costWeight: t.int({
      description:
        'priceUsd in @cost units (0.0001 USD, rounded up): the weight a field answered by this model would carry.',
      resolve: (model) => costWeight([defaultCall(model)]),
    }),
    bands: t.field({
      type: [ModelScore],
      description:
        'Its scores per temperature band ("0", "(0, 0.7]", "(0.7, 1]"): answers, correct answers, accuracy and its Wilson lower bound, mean cost and latency. A band without answers yet is left out.',
      listSize: { assumedSize: BANDS.length },
      resolve: (model) => model.bands,
    }),
  }),
});

builder.asEntity(ModelEntity, {
  key: builder.selection<{ name: string }>('name'),
  resolveReference: async (reference, context) => {
    const { name } = reference as { name?: unknown };
    if (typeof name !== 'string') throw badUserInput('a Model representation needs its key: name, a string');
    const service = serviceOf(name);
    if (service === undefined) return null;
    return { name, service, bands: await context.loaders.modelScores.load(name) };
  },
});
