/**
 * Which API version of an upstream serves a call, learnt at run time, so that clients never notice a
 * migration (NULL_API_VERSION, PI_API_VERSION: auto | v1 | v2).
 *
 * - A call carries its v1 form and, where the upstream has one, its v2 form; this layer sends the one
 *   of the upstream's current version.
 * - `auto`: the start version comes from `initial` (null-check: v2 when the upstream's /openapi.json
 *   lists it, read by `openApiDiscovery` below; pi-digits: v1 while it is served). A call answered 404 or 410 is retried once over the
 *   other version within the same call; when that one answers anything but 404/410 the upstream has
 *   moved, and every later call goes there (one log line). When both answer 404/410 it was not a
 *   retirement and nothing changes. `v1`/`v2`: fixed, never switched.
 * - A version may be refused before any network (`refuse`): pi over v2 needs the operator's waiver.
 * - Deprecation headers on any real answer are counted and logged once per endpoint with the Sunset
 *   date (`onDeprecated`), and kept for the `health` query.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import type { UpstreamCallError, UpstreamName } from '../../errors.js';
import {
  type AnswerHandler,
  type ApiVersion,
  type Dispatch,
  dispatchPromise,
  type EndpointName,
  type HttpForm,
  type Interceptor,
  type UpstreamAnswer,
  type UpstreamRequest,
} from '../dispatch.js';
import { isGone } from '../status-mapping.js';

export type VersionSetting = 'auto' | ApiVersion;

export interface ApiVersionsOptions {
  upstream: UpstreamName;
  setting: VersionSetting;
  /**
   * Under `auto`, how to pick the start version (e.g. read the upstream's /openapi.json); called once
   * with the dispatch below this layer. Resolving undefined keeps v1. A rejection keeps v1 and is
   * retried after `rediscoverAfterMs`.
   */
  initial?: ((dispatch: Dispatch) => Promise<ApiVersion | undefined>) | undefined;
  /** @default 30000 */
  rediscoverAfterMs?: number;
  /** An error when calls may not use `version` (answered without any network), else undefined. */
  refuse?: ((version: ApiVersion) => UpstreamCallError | undefined) | undefined;
  logger?: Logger | undefined;
  /** Told of each real answer marked deprecated (metrics). */
  onDeprecated?: ((endpoint: EndpointName, sunset: string | null) => void) | undefined;
}

export interface ApiVersionsState {
  /** The version calls go to now. */
  readonly apiVersion: ApiVersion;
  /** Whether the endpoint of the last answer was marked deprecated, and its Sunset date. */
  readonly deprecated: boolean;
  readonly sunset: string | null;
}

export interface ApiVersions {
  readonly interceptor: Interceptor;
  state(): ApiVersionsState;
  /** Stops looking for the start version again (the upstream's pool is closing). */
  close(): void;
  /** Settles once the first look for the start version has answered or failed (at once without one). */
  readonly ready: Promise<void>;
}

/**
 * How often a version the gateway may not call (pi over v2 without the waiver) gives way to one more
 * try of the other: if the retired v1 comes back, calls find it again.
 */
const REVISIT_MS = 30_000;

const other = (version: ApiVersion): ApiVersion => (version === 'v1' ? 'v2' : 'v1');

export interface OpenApiDiscoveryOptions {
  upstream: UpstreamName;
  /** The v2 operation whose presence in the document means "start on v2", e.g. `POST /api/v2/null-or-not`. */
  v2: { method: 'get' | 'post'; path: string };
  /** The read's own timeout (a discovery must not hold the gateway's start for long). */
  timeoutMs: number;
}

/**
 * An `initial` for `createApiVersions`: reads the upstream's /openapi.json (no key, no retry) and
 * starts on v2 when the document lists `options.v2`, else on v1. No document (404/410) is an answer
 * too, v1: as a failure it would be retried every 30 s forever, each time with a log line, for any
 * upstream that publishes no document. Other failures reject (tried again later).
 */
export function openApiDiscovery(
  options: OpenApiDiscoveryOptions,
): (dispatch: Dispatch) => Promise<ApiVersion> {
  const { method, path } = options.v2;
  /** The part of the document that names the operation; any other shape, or none, is v1. */
  const listing = z.object({ paths: z.object({ [path]: z.object({ [method]: z.unknown() }) }) });
  const form: HttpForm<ApiVersion> = {
    endpoint: 'openapi',
    version: 'v1',
    method: 'GET',
    path: '/openapi.json',
    retry: 'none',
    decode: (json) => {
      const document = listing.safeParse(json);
      return document.success && document.data.paths[path]?.[method] !== undefined ? 'v2' : 'v1';
    },
    facts: () => ({ costUsd: null, sponsor: null, model: null }),
  };
  return (dispatch) =>
    dispatchPromise(dispatch, {
      upstream: options.upstream,
      forms: { v1: form },
      form,
      operation: undefined,
      anonymous: true,
      timeoutMs: options.timeoutMs,
      mayBeGone: true,
    }).then(
      (answer) => answer.value,
      (error: unknown) => {
        if (isGone(error)) return 'v1';
        throw error;
      },
    );
}

export function createApiVersions(options: ApiVersionsOptions): ApiVersions {
  const { upstream, setting, logger, refuse } = options;
  let version: ApiVersion = setting === 'auto' ? 'v1' : setting;
  /** Set once a call taught the version: a late discovery answer must not undo it. */
  let learnt = false;
  let revisitedAt = 0;
  let rediscovery: NodeJS.Timeout | undefined;
  let closed = false;
  let settleReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    settleReady = resolve;
  });
  if (setting !== 'auto' || options.initial === undefined) settleReady();
  /** Endpoint → Sunset of every endpoint seen deprecated (logged once each). */
  const deprecatedEndpoints = new Map<EndpointName, string | null>();
  let lastEndpoint: EndpointName | undefined;

  const observe = (answer: UpstreamAnswer): void => {
    lastEndpoint = answer.endpoint;
    const deprecation = answer.deprecation;
    if (deprecation !== undefined) {
      options.onDeprecated?.(answer.endpoint, deprecation.sunset);
      if (!deprecatedEndpoints.has(answer.endpoint)) {
        deprecatedEndpoints.set(answer.endpoint, deprecation.sunset);
        logger?.warn(
          { upstream, endpoint: answer.endpoint, sunset: deprecation.sunset },
          'upstream endpoint is deprecated',
        );
      }
    }
  };

  const moveTo = (to: ApiVersion, because: number | undefined) => {
    learnt = true;
    revisitedAt = Date.now();
    if (version === to) return;
    logger?.warn(
      { upstream, from: version, to, upstreamStatus: because },
      because === undefined
        ? `upstream ${upstream} moved back to ${to}: it answers there again`
        : `upstream ${upstream} moved to ${to}: its ${version} endpoint answered ${because}`,
    );
    version = to;
  };

  const interceptor: Interceptor = (next: Dispatch) => {
    if (setting === 'auto' && options.initial !== undefined) {
      const discover = (): void => {
        options.initial?.(next).then(
          (found) => {
            if (found !== undefined && found !== version && !learnt) {
              logger?.info({ upstream, version: found }, `upstream ${upstream}: using API ${found}`);
              version = found;
            }
            settleReady();
          },
          (error: unknown) => {
            settleReady();
            logger?.info(
              { upstream, err: error instanceof Error ? error.message : String(error) },
              `upstream ${upstream}: API version discovery failed; using ${version}, trying again later`,
            );
            if (closed || learnt) return;
            rediscovery = setTimeout(discover, options.rediscoverAfterMs ?? 30_000);
            rediscovery.unref();
          },
        );
      };
      discover();
    }

    return function versioned<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
      const call = new VersionedCall(next, request, handler);
      if (request.forms.v2 === undefined) {
        next(request, call);
        return;
      }
      const current = version;
      if (setting !== 'auto') {
        call.send(current, false);
        return;
      }
      const refusal = refuse?.(current);
      if (refusal !== undefined) {
        // The gateway may not call this version; once in a while, see whether the other is back.
        const now = Date.now();
        if (now - revisitedAt < REVISIT_MS) {
          handler.onError(refusal);
          return;
        }
        revisitedAt = now;
        call.phase = 'revisit';
        call.failure = refusal;
        call.send(other(current), true);
        return;
      }
      // Marked so that a 404/410 (the switch below) is not also logged as an upstream failure.
      call.phase = 'current';
      call.send(current, true);
    };
  };

  /**
   * One call through this layer, the handler of each of its sends: `plain` (one version, no
   * switching), `current` (the current version, which may answer 404/410), `other` (the other version
   * after such an answer, `failure`), `revisit` (the other version while the current one is refused
   * with `failure`).
   */
  class VersionedCall<T> implements AnswerHandler<T> {
    phase: 'plain' | 'current' | 'other' | 'revisit' = 'plain';
    /** The version of the last send. */
    to: ApiVersion = 'v1';
    failure: UpstreamCallError | undefined = undefined;

    constructor(
      private readonly next: Dispatch,
      private readonly request: UpstreamRequest<T>,
      private readonly handler: AnswerHandler<T>,
    ) {}

    send(to: ApiVersion, mayBeGone: boolean): void {
      this.to = to;
      const refusal = refuse?.(to);
      if (refusal !== undefined) {
        this.onError(refusal);
        return;
      }
      const request = this.request;
      const form = to === 'v2' ? request.forms.v2 : request.forms.v1;
      if (form === request.form) {
        // The form the call already has (v1, the usual case): the call's own request goes on, marked
        // in place rather than copied (a request is one call's: callModel makes one per call).
        if (mayBeGone) request.mayBeGone = true;
        this.next(request, this);
        return;
      }
      this.next({ ...request, form: form ?? request.forms.v1, mayBeGone }, this);
    }

    onAnswer(answer: UpstreamAnswer<T>): void {
      try {
        observe(answer as UpstreamAnswer);
        if (this.phase === 'other') moveTo(this.to, this.failure?.statusCode);
        else if (this.phase === 'revisit') moveTo(this.to, undefined);
      } catch (error) {
        // A throwing metrics or log callback fails the call, as a throw in an async layer did.
        this.handler.onError(error);
        return;
      }
      this.handler.onAnswer(answer);
    }

    onError(error: unknown): void {
      switch (this.phase) {
        case 'plain':
          break;
        case 'revisit':
          if (isGone(error)) error = this.failure;
          break;
        case 'current':
          if (!isGone(error)) break;
          this.phase = 'other';
          this.failure = error;
          // After the 404/410's own callback (undici's) has returned, as an awaited retry was.
          queueMicrotask(() => this.send(other(this.to), false));
          return;
        case 'other': {
          const first = this.failure as UpstreamCallError;
          if (isGone(error)) {
            error = first; // neither version is there: no retirement, nothing learnt
            break;
          }
          // The other version exists (it answered something else, or the gateway refused to call it).
          moveTo(this.to, first.statusCode);
          break;
        }
      }
      this.handler.onError(error);
    }
  }

  return {
    interceptor,
    ready,
    close() {
      closed = true;
      clearTimeout(rediscovery);
    },
    state() {
      const sunset = lastEndpoint === undefined ? undefined : deprecatedEndpoints.get(lastEndpoint);
      return { apiVersion: version, deprecated: sunset !== undefined, sunset: sunset ?? null };
    },
  };
}
