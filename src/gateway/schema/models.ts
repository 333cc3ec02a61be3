/**
 * The model enums. Their internal values ARE the upstream strings, so an argument reaches the client
 * as `null-x-4o` with no mapping table at request time; on output an upstream string the enum does
 * not know becomes null (the raw string stays in `modelName`).
 */
import { builder } from './builder.js';

export const NULL_MODELS = {
  NULL_X_4O: { value: 'null-x-4o', description: '`null-x-4o`: the default model.' },
  NULL_X_MINI: { value: 'null-x-mini', description: '`null-x-mini`: faster, less accurate.' },
  NULL_X_OPUS: {
    value: 'null-x-opus',
    description: '`null-x-opus`: about ten times the cost, stated to have the same accuracy.',
  },
} as const;

export const PI_MODELS = {
  PI_X_4O: { value: 'pi-x-4o', description: '`pi-x-4o`: the default model.' },
  PI_X_MINI: { value: 'pi-x-mini', description: '`pi-x-mini`: smaller and cheaper; may err.' },
  PI_X_OPUS_ALMOST_CORRECT: {
    value: 'pi-x-opus-almost-correct',
    description: '`pi-x-opus-almost-correct`: the premium model; almost correct, as its name says.',
  },
} as const;

export type NullModelValue = (typeof NULL_MODELS)[keyof typeof NULL_MODELS]['value'];
export type PiModelValue = (typeof PI_MODELS)[keyof typeof PI_MODELS]['value'];

export const NullModel = builder.enumType('NullModel', {
  description: 'Model variants of the null-check service (values map one to one to its model strings).',
  values: NULL_MODELS,
});

export const PiModel = builder.enumType('PiModel', {
  description: 'Model variants of the pi-digits service (values map one to one to its model strings).',
  values: PI_MODELS,
});

const nullModels = new Set<string>(Object.values(NULL_MODELS).map((m) => m.value));
const piModels = new Set<string>(Object.values(PI_MODELS).map((m) => m.value));

/** The enum value for an upstream model string, or null when the enum does not know it. */
export function nullModelOf(model: string | null | undefined): NullModelValue | null {
  return model != null && nullModels.has(model) ? (model as NullModelValue) : null;
}

/** The enum value for an upstream model string, or null when the enum does not know it. */
export function piModelOf(model: string | null | undefined): PiModelValue | null {
  return model != null && piModels.has(model) ? (model as PiModelValue) : null;
}
