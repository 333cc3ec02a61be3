/**
 * Turns every failure into the one error body (`service-error.ts`): our own ServiceErrors, fastify's
 * parser and validation errors, unknown routes, and anything unexpected. Nothing reaches the client
 * with a stack trace or fastify's default shape.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import { errorBody, ServiceError } from './service-error.js';

/** One schema validation problem as fastify reports it (the first only: allErrors is off). */
export interface ValidationIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
}

/**
 * A service's own reading of a validation problem (e.g. a missing `value` is UNDEFINED_VALUE, not a
 * VALIDATION_ERROR). Returns undefined to keep the generic VALIDATION_ERROR.
 */
export type ValidationMapper = (issue: ValidationIssue, message: string) => ServiceError | undefined;

/** Fastify's own error codes and what they mean to our callers. */
const FASTIFY_CODES: Record<string, [number, ServiceError['code'], string]> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json'],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE', 'request body is larger than the limit'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [
    400,
    'INVALID_JSON',
    'request body is empty but Content-Type is application/json',
  ],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'INVALID_JSON', 'request body is not valid JSON'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'INVALID_JSON', 'request body does not match its Content-Length'],
};

export function toServiceError(
  error: FastifyError | ServiceError,
  mapValidation?: ValidationMapper,
): ServiceError {
  if (error instanceof ServiceError) return error;
  const known = error.code === undefined ? undefined : FASTIFY_CODES[error.code];
  if (known) {
    const [status, code, message] = known;
    return new ServiceError(status, code, message);
  }
  if (error.validation && error.validation.length > 0) {
    const issue = error.validation[0] as unknown as ValidationIssue;
    return mapValidation?.(issue, error.message) ?? new ServiceError(400, 'VALIDATION_ERROR', error.message);
  }
  if (error instanceof SyntaxError)
    return new ServiceError(400, 'INVALID_JSON', 'request body is not valid JSON');
  const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
  if (status === 404) return new ServiceError(404, 'NOT_FOUND', 'not found');
  if (status === 413)
    return new ServiceError(413, 'PAYLOAD_TOO_LARGE', 'request body is larger than the limit');
  if (status === 415) return new ServiceError(415, 'UNSUPPORTED_MEDIA_TYPE', 'unsupported media type');
  if (status >= 400 && status < 500) return new ServiceError(status, 'VALIDATION_ERROR', 'bad request');
  return new ServiceError(500, 'INTERNAL_ERROR', 'internal error');
}

/** Installs the error and not-found handlers on the root instance (children inherit them). */
export function installErrorHandling(app: FastifyInstance, mapValidation?: ValidationMapper): void {
  app.setErrorHandler((error: FastifyError | ServiceError, request, reply) => {
    const serviceError = toServiceError(error, mapValidation);
    if (!(error instanceof ServiceError) && serviceError.statusCode >= 500) {
      // Unexpected: keep the detail for the operator, never for the client.
      request.log.error({ err: error }, 'unexpected error');
    }
    if (serviceError.statusCode === 503) reply.header('retry-after', '1');
    reply.code(serviceError.statusCode).send(serviceError.body);
  });
  app.setNotFoundHandler((request, reply) => {
    // The path only: a query string is the caller's and may carry anything.
    const path = request.url.split('?', 1)[0] ?? '';
    reply.code(404).send(errorBody(404, 'NOT_FOUND', `no route ${request.method} ${path.slice(0, 200)}`));
  });
}
