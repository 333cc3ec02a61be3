/**
 * `models: [ModelScore!]!`: the scoreboard (docs/graphql.md, Models): every model of each service,
 * per temperature band, scored against the truth the gateway computes. Calls nothing upstream (it
 * reads the score store: memory, or one Redis round trip that also writes this replica's new scores).
 */
import { BANDS, type ModelScore as ModelScoreShape } from '../models/scoreboard.js';
import { SERVICE_MODELS } from '../models/service-models.js';
import { builder } from './builder.js';
import { fieldTable } from './field-table.js';

const MODEL_SCORE_ROWS = Object.values(SERVICE_MODELS).flat().length * BANDS.length;

export const ModelScore = builder.objectRef<ModelScoreShape>('ModelScore').implement({
  description:
    'How one model of a service answered at one temperature band, judged against the truth the gateway computes (strict null; the true digits of pi). Answers served from the response cache or shared with another call are counted once, where the upstream answered.',
  fields: (t) => ({
    ...fieldTable(
      {
        service: 'The service: "null-check" (isNull) or "pi-digits" (pi and inference share its scores).',
        model: 'The model as the service names it (the model asked for), e.g. "null-x-4o".',
        band: 'The temperature band: "0" (0 or omitted), "(0, 0.7]" or "(0.7, 1]". Routing compares models within the band of the request.',
      },
      (name, description) => t.exposeString(name, { description }),
    ),
    ...fieldTable(
      {
        answers: 'Answers scored (maybe and existential answers included).',
        correct:
          'Correct answers: a boolean verdict equal to actuallyNull; digits of pi (not e) with every requested decimal place right.',
        maybe: 'Answers "maybe" (null-check; counted in answers, never correct).',
        existential: 'Existential answers (null-check; counted in answers, never correct).',
        eInsteadOfPi: 'Digits of e instead of pi (pi-digits; counted in answers, never correct).',
      },
      (name, description) => t.exposeInt(name, { description }),
    ),
    ...fieldTable(
      {
        accuracy: 'correct / answers.',
        accuracyLowerBound:
          'The lower bound of the 95 % Wilson score interval of accuracy: what the accuracy is at least, honest about small samples. Routing by minAccuracy compares this.',
        meanCostUsd: 'Mean cost of an answer in US dollars, as the service reported it.',
        meanLatencyMs:
          'Mean time from the call to its answer as the gateway measured it (retries included), in ms.',
      },
      (name, description) => t.exposeFloat(name, { description }),
    ),
  }),
});

builder.queryField('models', (t) =>
  t.field({
    type: [ModelScore],
    description:
      'The model scoreboard: per service, model and temperature band, every answer scored against the truth (shared by every replica through REDIS_URL). Ordered by service, model, band. Calls nothing upstream.',
    cost: 0,
    // At most a row per model of each service and band (a router's demand control multiplies by it).
    listSize: { assumedSize: MODEL_SCORE_ROWS },
    resolve: (_root, _args, context) => context.models.rows(),
  }),
);
