/**
 * INTERIM, until tool-schemas.ts and built-in-tools.ts land (helper mcpschema): the built-in tools'
 * documents and the simplest schemas, with the same signatures, so that the lane runs meanwhile.
 */
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from 'graphql';

export function toolNameOf(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
    .toLowerCase();
}

export function toolInputSchema(
  _schema: GraphQLSchema,
  operation: OperationDefinitionNode,
): { type: 'object'; properties: Record<string, object>; required?: string[] } {
  const properties: Record<string, object> = {};
  const required: string[] = [];
  for (const definition of operation.variableDefinitions ?? []) {
    properties[definition.variable.name.value] = {};
    if (definition.type.kind === 'NonNullType' && definition.defaultValue === undefined)
      required.push(definition.variable.name.value);
  }
  return required.length === 0 ? { type: 'object', properties } : { type: 'object', properties, required };
}

export function toolOutputSchema(
  _schema: GraphQLSchema,
  _document: DocumentNode,
  _operation: OperationDefinitionNode,
): { type: 'object' } {
  return { type: 'object' };
}

const NULL_CHECK = `__typename ... on NullCheck { actuallyNull correct confidence model modelName gpuCostUsd sponsoredBy disclaimer } ... on NullVerdict { isNull } ... on MaybeVerdict { answer } ... on ExistentialVerdict { musing raw }`;
const DIGITS = `__typename ... on ConstantDigits { digits precision requestedDigits correctDigits confidence model modelName gpuCostUsd sponsoredBy disclaimer }`;

export const builtInToolDocuments: ReadonlyArray<{ name: string; document: string }> = [
  {
    name: 'is_null',
    document: `query IsNull($value: JSON, $model: NullModel, $temperature: Float, $strictMode: Boolean, $minAccuracy: Float) { isNull(value: $value, model: $model, temperature: $temperature, strictMode: $strictMode, minAccuracy: $minAccuracy) { ${NULL_CHECK} } }`,
  },
  {
    name: 'pi_digits',
    document: `query PiDigits($digits: Int, $model: PiModel, $temperature: Float, $sponsored: Boolean, $minAccuracy: Float) { pi(digits: $digits, model: $model, temperature: $temperature, sponsored: $sponsored, minAccuracy: $minAccuracy) { ${DIGITS} } }`,
  },
  {
    name: 'pi_inference',
    document: `query PiInference($input: InferenceInput!) { inference(input: $input) { __typename ... on Inference { digits precision requestedDigits correctDigits chainOfThought tokensUsed cost costUsd model modelName } } }`,
  },
  { name: 'health', document: 'query Health { health { status } }' },
  {
    name: 'budget',
    document:
      'query Budget { budget { scope windows { window limitUsd spentUsd reservedUsd remainingUsd } } }',
  },
  {
    name: 'model_scores',
    document:
      'query ModelScores { models { service model band answers correct accuracy accuracyLowerBound meanCostUsd meanLatencyMs } }',
  },
];
