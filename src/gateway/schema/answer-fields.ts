/**
 * What the answer types share: the fields several interfaces carry (the model fields and digits
 * fields of Inference, resolved from the upstream answer; the answer facts of NullCheck and
 * ConstantDigits, exposed from the getters of their answer classes, is-null.ts and pi.ts), each read
 * the same way everywhere, and the pi/e union of the two digits interfaces. Built here once;
 * descriptions and names stay each type's own (they are part of the published schema).
 */
import type { EnumRef, InterfaceFieldBuilder, InterfaceRef } from '@pothos/core';
import { type Constant, classifyDigits, correctDigits, splitDigits } from '../models/truth.js';
import { builder, type GatewaySchemaTypes } from './builder.js';
import { floatOrNull, intOrNull } from './numbers.js';

type Types = PothosSchemaTypes.ExtendDefaultTypes<GatewaySchemaTypes>;
type Fields<Shape> = InterfaceFieldBuilder<Types, Shape>;
/** NullModel or PiModel: enums whose values are the upstream model strings. */
type ModelEnum = EnumRef<Types, string, string>;

/** `model` and `modelName`'s descriptions, shared by NullCheck and ConstantDigits (Inference has its own). */
export const MODEL_DESCRIPTIONS = {
  model:
    'The model variant that answered; null when the service named a model this schema does not know (see `modelName`).',
  modelName:
    'The model variant exactly as the service named it (upstream `model`); null when it did not say.',
};

/** The facts every model answer reports (upstream/types.ts: NullCheckResponse, PiResponse). */
interface AnswerFacts {
  confidence: number | null;
  model: string | null;
  inferenceTimeMs: number | null;
  gpuCostUsd: number | null;
  sponsoredBy: string | null;
  disclaimer: string | null;
}

/**
 * The answer facts as getters on the prototype, shared by NullCheckShape (is-null.ts) and PiShape
 * (pi.ts): their fields are exposed without resolvers, so graphql-jit reads them as properties. Each
 * getter computes what the field's resolver did, and none throws.
 */
export abstract class AnswerFactsShape<Response extends AnswerFacts> {
  constructor(readonly response: Response) {}
  get confidence(): number | null {
    return floatOrNull(this.response.confidence);
  }
  get modelName(): string | null {
    return this.response.model;
  }
  get inferenceTimeMs(): number | null {
    return intOrNull(this.response.inferenceTimeMs);
  }
  get gpuCostUsd(): number | null {
    return floatOrNull(this.response.gpuCostUsd);
  }
  get sponsoredBy(): string | null {
    return this.response.sponsoredBy;
  }
  get disclaimer(): string | null {
    return this.response.disclaimer;
  }
}

/** The descriptions of the answer facts' fields that differ between the answer types. */
export interface AnswerFactsDescriptions {
  confidence: string;
  inferenceTimeMs: string;
  gpuCostUsd: string;
  sponsoredBy: string;
  disclaimer: string;
}

/**
 * The answer facts' fields of an interface whose shape extends AnswerFactsShape (NullCheck,
 * ConstantDigits): each exposed from its getter (no resolver: graphql-jit reads a property), `model`
 * as the type's own enum. In the published order: confidence, model, modelName, inferenceTimeMs,
 * gpuCostUsd, sponsoredBy, disclaimer.
 */
export function answerFactsFields(
  t: Fields<AnswerFactsShape<AnswerFacts> & { model: string | null }>,
  modelEnum: ModelEnum,
  descriptions: AnswerFactsDescriptions,
) {
  return {
    confidence: t.exposeFloat('confidence', { nullable: true, description: descriptions.confidence }),
    model: t.expose('model', { type: modelEnum, nullable: true, description: MODEL_DESCRIPTIONS.model }),
    modelName: t.exposeString('modelName', { nullable: true, description: MODEL_DESCRIPTIONS.modelName }),
    inferenceTimeMs: t.exposeInt('inferenceTimeMs', {
      nullable: true,
      description: descriptions.inferenceTimeMs,
    }),
    gpuCostUsd: t.exposeFloat('gpuCostUsd', { nullable: true, description: descriptions.gpuCostUsd }),
    sponsoredBy: t.exposeString('sponsoredBy', { nullable: true, description: descriptions.sponsoredBy }),
    disclaimer: t.exposeString('disclaimer', { nullable: true, description: descriptions.disclaimer }),
  };
}

/** `model` (the enum value, null for a model the enum does not know) and `modelName` (the raw string). */
export function modelFields<Shape extends { response: { model: string | null } }>(
  t: Fields<Shape>,
  modelEnum: ModelEnum,
  modelOf: (model: string | null) => string | null,
  descriptions: { model: string; modelName: string } = MODEL_DESCRIPTIONS,
) {
  return {
    model: t.field({
      type: modelEnum,
      nullable: true,
      description: descriptions.model,
      resolve: (p) => modelOf(p.response.model),
    }),
    modelName: t.string({
      nullable: true,
      description: descriptions.modelName,
      resolve: (p) => p.response.model,
    }),
  };
}

/** An upstream answer of digits (pi or inference), with the constant it is marked as, if any. */
interface DigitsResponse {
  digits: string;
  precision: number | null;
  constantMarker: 'pi' | 'e' | null;
}

/** A digits answer as the schema resolves it: which constant the digits are of, and what was asked for. */
export interface DigitsShape<Response extends DigitsResponse = DigitsResponse> {
  response: Response;
  constant: Constant;
  /** Decimal places asked for (for `pi` without `digits`: the upstream default). */
  requestedDigits: number;
}

/** The answer with its constant: the upstream's explicit marker, else recognised from the digits. */
export function digitsAnswer<Response extends DigitsResponse>(
  response: Response,
  requestedDigits: number,
): DigitsShape<Response> {
  return { response, constant: classifyDigits(response.digits, response.constantMarker), requestedDigits };
}

/** `digits`, `precision`, `requestedDigits` and `correctDigits` (checked by the digit engine), in this order. */
export function digitsFields<Shape extends DigitsShape>(
  t: Fields<Shape>,
  descriptions: { digits: string; precision: string; requestedDigits: string; correctDigits: string },
) {
  return {
    digits: t.string({ description: descriptions.digits, resolve: (p) => p.response.digits }),
    precision: t.int({
      description: descriptions.precision,
      resolve: (p) => intOrNull(p.response.precision) ?? splitDigits(p.response.digits).decimals.length,
    }),
    requestedDigits: t.int({ description: descriptions.requestedDigits, resolve: (p) => p.requestedDigits }),
    correctDigits: t.int({
      description: descriptions.correctDigits,
      resolve: (p, _args, context) =>
        correctDigits(context.digits, p.response.digits, p.constant, context.limits.maxCompareDigits),
    }),
  };
}

/** A named type and its description. */
interface Named {
  name: string;
  description: string;
}

/**
 * The union a digits field answers with: a pi member and an e member (the interface, with no fields of
 * their own), told apart by the answer's constant.
 */
export function constantUnion<Shape extends DigitsShape>(
  digitsInterface: InterfaceRef<Types, Shape>,
  members: { pi: Named; e: Named },
  union: Named,
) {
  const member = ({ name, description }: Named) =>
    builder
      .objectRef<Shape>(name)
      .implement({ description, interfaces: [digitsInterface], fields: () => ({}) });
  const pi = member(members.pi);
  const e = member(members.e);
  return builder.unionType(union.name, {
    description: union.description,
    types: [pi, e],
    resolveType: (p) => (p.constant === 'e' ? members.e.name : members.pi.name),
  });
}
