/**
 * `inference(input:)`: the pi-digits service's beta POST /inference behind
 * `union InferenceResult = PiInference | EulerInference`. The waiver is checked here, before any
 * upstream call.
 */

import {
  numberArgument,
  routeOf,
  stringArgument,
  type UpstreamFieldExtension,
} from '../operation/operation-plan.js';
import { inferencePricing } from '../upstream/pi-digits-client.js';
import type { InferenceRequest, InferenceResponse } from '../upstream/types.js';
import { constantUnion, type DigitsShape, digitsAnswer, digitsFields, modelFields } from './answer-fields.js';
import { builder } from './builder.js';
import { checkDigits, rethrowAsFieldError, waiverRequired } from './errors.js';
import { fieldCost } from './field-cost.js';
import { checkModelAsked, minAccuracyDescription, modelToSend } from './model-choice.js';
import { PiModel, piModelOf } from './models.js';
import { floatOrNull, intOrNull } from './numbers.js';

export type InferenceShape = DigitsShape<InferenceResponse>;

export const InferenceInput = builder.inputType('InferenceInput', {
  description: "The body of the inference endpoint (the pi-digits service's inference request).",
  fields: (t) => ({
    desiredDigits: t.int({ required: true, description: 'Decimal places wanted, 0 to MAX_DIGITS.' }),
    model: t.field({ type: PiModel, description: 'Model variant. Omitted: the service default.' }),
    temperature: t.float({ description: 'Creativity, 0 to 1. Above 0 e may come back instead of pi.' }),
    useChainOfThought: t.boolean({ description: 'Ask for the reasoning text (`chainOfThought`).' }),
    minAccuracy: t.float({
      description: minAccuracyDescription(
        'pi-digits',
        "the pi-digits service's scores, shared with `pi`; ",
        '',
      ),
    }),
    liabilityWaiverSigned: t.boolean({
      required: true,
      description:
        'Acknowledges that generated digits may not match the real constant. Must be true, else ' +
        'WAIVER_REQUIRED (checked by the gateway; no upstream call).',
    }),
  }),
});

export const Inference = builder.interfaceRef<InferenceShape>('Inference').implement({
  description: 'An answer of the inference endpoint, with what the gateway checked.',
  fields: (t) => ({
    ...digitsFields(t, {
      digits: 'The generated decimal string (upstream `digits`).',
      precision: 'Decimal places returned (upstream `precision`, else counted in `digits`).',
      requestedDigits: 'Decimal places asked for (`desiredDigits`). `precision` below it shows a clamp.',
      correctDigits:
        'Leading decimal places that agree with the true constant of this member (pi or e), checked by the ' +
        'gateway; 0 when the integer part differs.',
    }),
    chainOfThought: t.string({
      nullable: true,
      description: "The model's reasoning text (upstream `chain_of_thought`); null when not sent.",
      resolve: (p) => p.response.chainOfThought,
    }),
    tokensUsed: t.int({
      nullable: true,
      description: 'Tokens consumed (upstream `tokens_used`).',
      resolve: (p) => intOrNull(p.response.tokensUsed),
    }),
    cost: t.string({
      nullable: true,
      description: 'Cost as the service formats it, a currency string such as "$0.0042" (upstream `cost`).',
      resolve: (p) => p.response.cost,
    }),
    costUsd: t.float({
      nullable: true,
      description: '`cost` parsed to US dollars; null when it does not parse.',
      resolve: (p) => floatOrNull(p.response.costUsd),
    }),
    ...modelFields(t, PiModel, piModelOf, {
      model: 'The model variant that answered; null when not sent or not known to this schema.',
      modelName: 'The model variant exactly as the service named it; null when the service did not say.',
    }),
  }),
});

export const InferenceResult = constantUnion(
  Inference,
  {
    pi: { name: 'PiInference', description: 'Inferred digits of pi.' },
    e: {
      name: 'EulerInference',
      description:
        'Inferred digits of e instead of pi (temperature above 0), by marker or by the digits themselves.',
    },
  },
  {
    name: 'InferenceResult',
    description: 'An inference answer: PiInference, or EulerInference when the model returned e instead.',
  },
);

const upstream = {
  calls: 1,
  pricedBy: ['input'],
  routedBy: 'input.minAccuracy',
  models: (args) => {
    const input = (args.input ?? {}) as {
      model?: unknown;
      desiredDigits?: unknown;
      minAccuracy?: unknown;
      temperature?: unknown;
    };
    return [
      {
        ...inferencePricing(stringArgument(input.model), numberArgument(input.desiredDigits)),
        route: routeOf(input),
      },
    ];
  },
} satisfies UpstreamFieldExtension;

builder.queryField('inference', (t) =>
  t.field({
    type: InferenceResult,
    nullable: true,
    description:
      'The beta inference endpoint of the pi-digits service (labelled v2). Needs liabilityWaiverSigned: true ' +
      '(else WAIVER_REQUIRED). Fails with BAD_USER_INPUT for negative or too many digits or temperature ' +
      'outside 0..1; TIER_FORBIDDEN, RATE_LIMITED, UPSTREAM_* codes as `pi`.',
    extensions: { upstream },
    cost: fieldCost(upstream),
    args: {
      input: t.arg({
        type: InferenceInput,
        required: true,
        description: 'What to infer, and the signed waiver.',
      }),
    },
    resolve: async (_root, { input }, context, info) => {
      const desiredDigits = checkDigits('desiredDigits', input.desiredDigits, context.limits.maxDigits);
      const asked = checkModelAsked(input);
      if (input.liabilityWaiverSigned !== true) throw waiverRequired();
      const request: InferenceRequest = {
        desiredDigits,
        // Routed, or a cheaper model when the budget asked for one (cost/fallback.ts), else the one asked for.
        model: modelToSend(context, info.path.key, asked, () => inferencePricing(undefined, desiredDigits)),
        temperature: asked.temperature,
        useChainOfThought: input.useChainOfThought ?? undefined,
        liabilityWaiverSigned: true,
      };
      const response = await context.loaders.inference.load(request).catch(rethrowAsFieldError);
      return digitsAnswer(response, desiredDigits);
    },
  }),
);
