/**
 * Per-operation loaders: identical upstream calls within one operation reach the upstream once. A
 * loader keeps the operation's calls of one kind by key; an identical request gets the first call's
 * promise (its answer, or its failure), and each share is counted in
 * `gateway_dedup_hits_total{source="dataloader"}`.
 *
 * Nothing is batched: the upstreams have no batch endpoint, so a call starts at once. A loader makes
 * its map at its first call: an operation that selects only `health`, or fails validation, makes none.
 */
import type { UpstreamName } from './errors.js';
import type { Operation } from './operation.js';
import type { UpstreamClients } from './upstream/clients.js';
import type {
  HealthProbe,
  InferenceRequest,
  InferenceResponse,
  NullCheckRequest,
  NullCheckResponse,
  NullHealthBody,
  PiHealthBody,
  PiRequest,
  PiResponse,
} from './upstream/types.js';

export type HealthPair = [HealthProbe<NullHealthBody>, HealthProbe<PiHealthBody>];

/** Told of each upstream call a loader saved. */
export type OnDedup = (upstream: UpstreamName) => void;

/** What a loader calls, for one operation. */
interface CallContext {
  clients: UpstreamClients;
  operation: Operation;
  onDedup: OnDedup;
}

/** One kind of upstream call: which upstream, how a request is keyed, and the call. */
interface CallKind<Request, Answer> {
  upstream: UpstreamName;
  /** Stable key: the request fields in a fixed order. */
  key(request: Request): string;
  call(context: CallContext, request: Request): Promise<Answer>;
}

/** The calls of one kind within one operation. */
export class Loader<Request, Answer> {
  #calls: Map<string, Promise<Answer>> | undefined;

  constructor(
    private readonly kind: CallKind<Request, Answer>,
    private readonly context: CallContext,
  ) {}

  /** The answer of the identical request made earlier in this operation, else of a new call. */
  load(request: Request): Promise<Answer> {
    const key = this.kind.key(request);
    this.#calls ??= new Map();
    const shared = this.#calls.get(key);
    if (shared !== undefined) {
      this.context.onDedup(this.kind.upstream);
      return shared;
    }
    const answer = this.kind.call(this.context, request);
    this.#calls.set(key, answer);
    return answer;
  }
}

const NULL_CHECK: CallKind<NullCheckRequest, NullCheckResponse> = {
  upstream: 'null-check',
  key: (r) => JSON.stringify([r.hasValue, r.hasValue ? r.value : 0, r.model, r.temperature, r.strictMode]),
  call: ({ clients, operation }, r) => clients.nullCheck.check(r, operation),
};

const PI: CallKind<PiRequest, PiResponse> = {
  upstream: 'pi-digits',
  key: (r) => JSON.stringify([r.digits, r.model, r.temperature, r.sponsored]),
  call: ({ clients, operation }, r) => clients.piDigits.pi(r, operation),
};

const INFERENCE: CallKind<InferenceRequest, InferenceResponse> = {
  upstream: 'pi-digits',
  key: (r) =>
    JSON.stringify([r.desiredDigits, r.model, r.temperature, r.useChainOfThought, r.liabilityWaiverSigned]),
  call: ({ clients, operation }, r) => clients.piDigits.inference(r, operation),
};

export interface Loaders {
  readonly nullCheck: Loader<NullCheckRequest, NullCheckResponse>;
  readonly pi: Loader<PiRequest, PiResponse>;
  readonly inference: Loader<InferenceRequest, InferenceResponse>;
  /** Both health probes, concurrently, once per operation. Never rejects. */
  health(): Promise<HealthPair>;
}

/** The loaders of one operation over `clients`. */
export function createLoaders(clients: UpstreamClients, operation: Operation, onDedup: OnDedup): Loaders {
  const context: CallContext = { clients, operation, onDedup };
  let health: Promise<HealthPair> | undefined;
  return {
    nullCheck: new Loader(NULL_CHECK, context),
    pi: new Loader(PI, context),
    inference: new Loader(INFERENCE, context),
    health: () =>
      (health ??= Promise.all([clients.health.nullCheck(operation), clients.health.piDigits(operation)])),
  };
}
