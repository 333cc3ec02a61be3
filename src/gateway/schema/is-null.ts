/**
 * `isNull(value: JSON, ...)`: the null-check service behind a union of its three answer shapes, plus
 * the truth (`actuallyNull`, `correct`) computed by the gateway.
 *
 * Omitted vs null: graphql-js leaves an omitted argument (and one bound to an unset variable) out of
 * `args`, and an explicit `null` in. `'value' in args` keeps the two apart all the way to the upstream.
 */

import { routeOf, stringArgument, type UpstreamFieldExtension } from '../operation/operation-plan.js';
import { checkPricing } from '../upstream/null-check-client.js';
import type { NullCheckRequest, NullCheckResponse, PhilosophicalAnalysis } from '../upstream/types.js';
import { AnswerFactsShape, answerFactsFields } from './answer-fields.js';
import { builder } from './builder.js';
import { badUserInput, rethrowAsFieldError } from './errors.js';
import { fieldCost } from './field-cost.js';
import { JsonScalar } from './json-scalar.js';
import type { JsonArgument } from './json-value.js';
import { checkModelAsked, minAccuracyDescription, modelToSend, ROUTING_SAID } from './model-choice.js';
import { NullModel, nullModelOf } from './models.js';
import { floatOrNull, intOrNull } from './numbers.js';

/**
 * A null-check answer plus what the gateway knows about the value that was asked about, and every
 * field of the NullCheckResult members as a getter on the prototype. The fields are exposed (no
 * resolver of their own), so graphql-jit reads them as properties in its compiled query instead of
 * calling a resolver with its own arguments, info, path and three closures per field (about 3 KB per
 * answer of 14 fields); graphql-js's default resolver reads the same getters. A getter computes
 * exactly what the field's resolver did, and none of them throws.
 */
export class NullCheckShape extends AnswerFactsShape<NullCheckResponse> {
  constructor(
    response: NullCheckResponse,
    /** value === null (strictly; an omitted value is not null). */
    readonly actuallyNull: boolean,
  ) {
    super(response);
  }
  get model(): ReturnType<typeof nullModelOf> {
    return nullModelOf(this.response.model);
  }
  get expertsConsulted(): number | null {
    return intOrNull(this.response.expertsConsulted);
  }
  get philosophicalAnalysis(): PhilosophicalAnalysis | null {
    return this.response.philosophicalAnalysis ?? null;
  }
  /** Whether a boolean answer agrees with `actuallyNull`; null for the others. */
  get correct(): boolean | null {
    const answer = this.response.answer;
    return answer.kind === 'boolean' ? answer.isNull === this.actuallyNull : null;
  }
  /** NullVerdict.isNull. */
  get isNull(): boolean {
    const answer = this.response.answer;
    return answer.kind === 'boolean' && answer.isNull;
  }
  /** MaybeVerdict.answer. */
  get answer(): string {
    return 'maybe';
  }
  /** ExistentialVerdict.musing. */
  get musing(): string | null {
    const answer = this.response.answer;
    return answer.kind === 'existential' ? answer.musing : null;
  }
  /** ExistentialVerdict.raw. */
  get raw(): unknown {
    return this.response.raw;
  }
}

export const PhilosophicalAnalysisRef = builder
  .objectRef<PhilosophicalAnalysis>('PhilosophicalAnalysis')
  .implement({
    description:
      "The null-check service's v2 philosophical analysis of its answer (upstream `philosophical_analysis`). Each typed field is null when the service left it out; `raw` keeps the untouched object.",
    fields: (t) => ({
      school: t.string({
        nullable: true,
        description: 'The school of thought the answer was reasoned in (upstream `school`).',
        resolve: (a) => a.school,
      }),
      certainty: t.float({
        nullable: true,
        description: "The analysis' own certainty, 0 to 1 (upstream `certainty`).",
        resolve: (a) => floatOrNull(a.certainty),
      }),
      argument: t.string({
        nullable: true,
        description: 'The argument, one sentence (upstream `argument`).',
        resolve: (a) => a.argument,
      }),
      references: t.stringList({
        nullable: true,
        description: 'Works the analysis cites (upstream `references`).',
        resolve: (a) => a.references,
      }),
      verdictStability: t.string({
        nullable: true,
        description:
          'How stable the verdict is, e.g. settled, wavering, dissolved (upstream `verdict_stability`).',
        resolve: (a) => a.verdictStability,
      }),
      depth: t.int({
        nullable: true,
        description: 'How deep the analysis went (upstream `depth`).',
        resolve: (a) => intOrNull(a.depth),
      }),
      raw: t.field({
        type: JsonScalar,
        description: 'The untouched `philosophical_analysis` object.',
        resolve: (a) => a.raw,
      }),
    }),
  });

export const NullCheck = builder.interfaceRef<NullCheckShape>('NullCheck').implement({
  description: 'What every null-check answer carries: the verdict metadata of the service, and the truth.',
  fields: (t) => {
    // expertsConsulted (the null-check service's own) keeps its published place, after gpuCostUsd.
    const { sponsoredBy, disclaimer, ...facts } = answerFactsFields(t, NullModel, {
      confidence: "The model's confidence in its answer, between 0 and 1 (upstream `confidence`).",
      inferenceTimeMs:
        'Inference time in milliseconds, as reported by the service (upstream `inference_time_ms`).',
      gpuCostUsd: 'Cost of this check in US dollars (upstream `gpu_cost_usd`).',
      sponsoredBy:
        'Sponsor message (upstream `sponsored_by`). The terms of service require it to be logged or displayed.',
      disclaimer:
        'Fixed text of the service: results may differ from strict equality (upstream `disclaimer`).',
    });
    return {
      ...facts,
      expertsConsulted: t.exposeInt('expertsConsulted', {
        nullable: true,
        description: 'Number of internal experts the service consulted (upstream `experts_consulted`).',
      }),
      sponsoredBy,
      disclaimer,
      philosophicalAnalysis: t.expose('philosophicalAnalysis', {
        type: PhilosophicalAnalysisRef,
        nullable: true,
        description:
          "The service's philosophical analysis, when the gateway reached it over its v2 API (POST /api/v2/null-or-not); null over v1.",
      }),
      actuallyNull: t.exposeBoolean('actuallyNull', {
        description:
          'The truth, computed by the gateway: whether the value asked about is strictly null. An omitted ' +
          '`value` (undefined) is not null.',
      }),
      correct: t.exposeBoolean('correct', {
        nullable: true,
        description:
          'Whether a boolean answer agrees with `actuallyNull`; null for `maybe` and existential answers, ' +
          'which are neither right nor wrong.',
      }),
    };
  },
});

export const NullVerdict = builder.objectRef<NullCheckShape>('NullVerdict').implement({
  description: 'A plain boolean answer (upstream `is_null` is true or false).',
  interfaces: [NullCheck],
  fields: (t) => ({
    isNull: t.exposeBoolean('isNull', {
      description: "The model's verdict: whether the value is null (upstream `is_null`).",
    }),
  }),
});

export const MaybeVerdict = builder.objectRef<NullCheckShape>('MaybeVerdict').implement({
  description:
    'The answer `"maybe"` (upstream `is_null` is the string "maybe"; only at temperature above 0).',
  interfaces: [NullCheck],
  fields: (t) => ({
    answer: t.exposeString('answer', { description: 'Always `"maybe"`.' }),
  }),
});

export const ExistentialVerdict = builder.objectRef<NullCheckShape>('ExistentialVerdict').implement({
  description:
    'Any other answer shape (the "existential dread" answers of temperatures above 0.7, which the service ' +
    'documents as "not shown"): its text and the untouched body, so nothing is lost.',
  interfaces: [NullCheck],
  fields: (t) => ({
    musing: t.exposeString('musing', {
      nullable: true,
      description: "The service's text, when its answer had one.",
    }),
    raw: t.expose('raw', {
      type: JsonScalar,
      nullable: true,
      description: 'The untouched upstream response body.',
    }),
  }),
});

export const NullCheckResult = builder.unionType('NullCheckResult', {
  description:
    'A null-check answer: NullVerdict (true/false), MaybeVerdict ("maybe", temperature above 0) or ' +
    'ExistentialVerdict (any other shape, temperature above 0.7).',
  types: [NullVerdict, MaybeVerdict, ExistentialVerdict],
  resolveType: (p) => {
    switch (p.response.answer.kind) {
      case 'boolean':
        return 'NullVerdict';
      case 'maybe':
        return 'MaybeVerdict';
      default:
        return 'ExistentialVerdict';
    }
  },
});

function boundedValue(arg: JsonArgument, limits: { maxJsonDepth: number; maxJsonBytes: number }): unknown {
  if (arg.depth > limits.maxJsonDepth) {
    throw badUserInput(
      `value is nested ${arg.depth} levels deep; at most ${limits.maxJsonDepth} are allowed`,
    );
  }
  if (arg.bytes > limits.maxJsonBytes) {
    throw badUserInput(`value is ${arg.bytes} bytes as JSON; at most ${limits.maxJsonBytes} are allowed`);
  }
  return arg.value;
}

const upstream = {
  calls: 1,
  pricedBy: ['model'],
  routedBy: 'minAccuracy',
  routedReads: ['minAccuracy', 'temperature'],
  models: (args) => [{ ...checkPricing(stringArgument(args.model)), route: routeOf(args) }],
} satisfies UpstreamFieldExtension;

builder.queryField('isNull', (t) =>
  t.field({
    type: NullCheckResult,
    nullable: true,
    description:
      'Asks the null-check service whether `value` is null. Omit `value` to ask about undefined (the ' +
      'service answers 400: UNDEFINED_VALUE); pass `null` for null. Fails with TIER_FORBIDDEN for ' +
      "strictMode beyond your tier, RATE_LIMITED, NULL_PARADOX (the service's 500), UPSTREAM_* codes.",
    extensions: { upstream },
    cost: fieldCost(upstream),
    args: {
      value: t.arg({
        type: JsonScalar,
        description: 'The value to check, any JSON. Omitted = undefined; `null` = null.',
      }),
      model: t.arg({
        type: NullModel,
        description: 'Model variant. Omitted: the service default (null-x-4o).',
      }),
      temperature: t.arg.float({
        description: 'Creativity, 0 to 1. Above 0 "maybe" may appear; above 0.7 existential answers too.',
      }),
      strictMode: t.arg.boolean({
        description: 'Distinguish null from undefined. Enterprise tier only (else TIER_FORBIDDEN).',
      }),
      minAccuracy: t.arg.float({ description: minAccuracyDescription('null-check', '', ROUTING_SAID) }),
    },
    resolve: async (_root, args, context, info) => {
      const asked = checkModelAsked(args);
      const arg = args.value;
      const given = 'value' in args && arg !== undefined;
      const value = arg != null ? boundedValue(arg, context.limits) : null;
      const request: NullCheckRequest = {
        hasValue: given,
        value: given ? value : undefined,
        // Routed, or a cheaper model when the budget asked for one (cost/fallback.ts), else the one asked for.
        model: modelToSend(context, info.path.key, asked, () => checkPricing(undefined)),
        temperature: asked.temperature,
        strictMode: args.strictMode ?? undefined,
      };
      const response = await context.loaders.nullCheck.load(request).catch(rethrowAsFieldError);
      return new NullCheckShape(response, given && value === null);
    },
  }),
);
