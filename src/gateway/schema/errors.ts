/**
 * Field errors the schema raises: argument checks (before any upstream call) and upstream failures
 * turned into the field's coded error. Codes come from the one table in ../errors.ts.
 *
 * Upstream failures are rethrown without their original error: Yoga masks any error whose original is
 * not a GraphQLError, and the upstream's body and cause belong in the log only (the clients logged
 * them already). Anything else is rethrown untouched, so Yoga masks it as "Unexpected error.".
 */
import type { GraphQLError } from 'graphql';
import { fieldErrorOf, gatewayError } from '../errors.js';

export function badUserInput(message: string): GraphQLError {
  return gatewayError('BAD_USER_INPUT', message);
}

export function waiverRequired(): GraphQLError {
  return gatewayError(
    'WAIVER_REQUIRED',
    'inference needs liabilityWaiverSigned: true (generated digits may not match the real constant)',
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

/**
 * minAccuracy (routing by quality): a finite number in 0..1, or absent; never beside `model` (the
 * caller asks for a model or for a quality, not both).
 */
export function checkMinAccuracy(
  minAccuracy: number | null | undefined,
  model: string | null | undefined,
): number | undefined {
  if (minAccuracy == null) return undefined;
  if (!Number.isFinite(minAccuracy) || minAccuracy < 0 || minAccuracy > 1) {
    throw badUserInput(`minAccuracy must be between 0 and 1, got ${minAccuracy}`);
  }
  if (model != null) {
    throw badUserInput(
      'model and minAccuracy exclude each other: name a model, or ask for an accuracy and let the gateway choose the model',
    );
  }
  return minAccuracy;
}

/** A digit count: an integer in 0..max. */
export function checkDigits(name: string, digits: number, max: number): number {
  if (!Number.isInteger(digits) || digits < 0) throw badUserInput(`${name} must be 0 or more, got ${digits}`);
  if (digits > max) throw badUserInput(`${name} must be at most ${max} (MAX_DIGITS), got ${digits}`);
  return digits;
}

/** Rethrows an upstream failure as the field's error (code, upstream, upstreamStatus, retryAfterSeconds). */
export function rethrowAsFieldError(error: unknown): never {
  throw fieldErrorOf(error);
}
