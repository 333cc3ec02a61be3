/**
 * Field errors the schema raises: argument checks (before any upstream call) and the mapping of
 * upstream failures to contract §2 codes.
 *
 * Why createGraphQLError without `originalError`: Yoga masks any error whose original is not a
 * GraphQLError. The UpstreamError stays out of the answer (its body and cause go to the log only); its
 * message is client-safe by the errors.ts contract.
 */
import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { isUpstreamError } from '../upstream/errors.js';

export function badUserInput(message: string): GraphQLError {
  return createGraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } });
}

export function waiverRequired(): GraphQLError {
  return createGraphQLError(
    'inference needs liabilityWaiverSigned: true (generated digits may not match the real constant)',
    { extensions: { code: 'WAIVER_REQUIRED' } },
  );
}

/** Temperature: a finite number in 0..1, or absent (the upstream default). */
export function checkTemperature(temperature: number | null | undefined): number | undefined {
  if (temperature == null) return undefined;
  if (!Number.isFinite(temperature) || temperature < 0 || temperature > 1) {
    throw badUserInput(`temperature must be between 0 and 1, got ${temperature}`);
  }
  return temperature;
}

/** A digit count: an integer in 0..max. */
export function checkDigits(name: string, digits: number, max: number): number {
  if (!Number.isInteger(digits) || digits < 0) throw badUserInput(`${name} must be 0 or more, got ${digits}`);
  if (digits > max) throw badUserInput(`${name} must be at most ${max} (MAX_DIGITS), got ${digits}`);
  return digits;
}

/**
 * Rethrows an upstream failure as the field's GraphQL error (code, upstream, upstreamStatus,
 * retryAfterSeconds). Anything else is rethrown untouched, so Yoga masks it ("Unexpected error.") and
 * logs it.
 */
export function rethrowAsFieldError(error: unknown): never {
  // The upstream clients already logged the failure with its raw body (never the key).
  if (isUpstreamError(error)) throw createGraphQLError(error.message, { extensions: error.toExtensions() });
  throw error;
}
