/**
 * The model enums. Their internal values ARE the upstream strings, so an argument reaches the client
 * as `null-x-4o` with no mapping table at request time; on output an upstream string the enum does
 * not know becomes null (the raw string stays in `modelName`).
 */
import { builder } from './builder.js';

/**
 * An enum of upstream model strings, each with what it is: the GraphQL value is the string in upper
 * case with `_` for `-` (`null-x-4o` is NULL_X_4O), its description the string and that text. Returns
 * the enum and the enum value of an upstream model string (null when the enum does not know it).
 */
function modelEnum<Model extends string>(name: string, description: string, models: Record<Model, string>) {
  const values: Record<string, { value: Model; description: string }> = {};
  for (const [model, text] of Object.entries<string>(models)) {
    values[model.toUpperCase().replaceAll('-', '_')] = {
      value: model as Model,
      description: `\`${model}\`: ${text}`,
    };
  }
  const known = new Set<string>(Object.keys(models));
  const modelOf = (model: string | null | undefined): Model | null =>
    model != null && known.has(model) ? (model as Model) : null;
  return [builder.enumType(name, { description, values }), modelOf] as const;
}

export const [NullModel, nullModelOf] = modelEnum(
  'NullModel',
  'Model variants of the null-check service (values map one to one to its model strings).',
  {
    'null-x-4o': 'the default model.',
    'null-x-mini': 'faster, less accurate.',
    'null-x-opus': 'about ten times the cost, stated to have the same accuracy.',
  },
);

export const [PiModel, piModelOf] = modelEnum(
  'PiModel',
  'Model variants of the pi-digits service (values map one to one to its model strings).',
  {
    'pi-x-4o': 'the default model.',
    'pi-x-mini': 'smaller and cheaper; may err.',
    'pi-x-opus-almost-correct': 'the premium model; almost correct, as its name says.',
  },
);
