/**
 * The seam between the upstream clients (src/upstream) and the GraphQL schema (src/schema).
 *
 * Clients speak the services' snake_case JSON over HTTP, validate it, and hand the schema these
 * camelCase shapes. The schema never sees HTTP; the clients never see GraphQL.
 */

export type { UpstreamName } from '../errors.js';

// --- null-check ----------------------------------------------------------------------------------

/** Body of POST /api/v1/check. `hasValue: false` sends a body WITHOUT the `value` key (undefined). */
export interface NullCheckRequest {
  hasValue: boolean;
  /** Sent as `value` only when `hasValue`; `null` is sent as `"value": null`. */
  value?: unknown;
  /** Upstream model string, e.g. `null-x-4o`. Omitted: the upstream default. */
  model?: string | undefined;
  temperature?: number | undefined;
  strictMode?: boolean | undefined;
}

/** The three answer shapes of `is_null`. */
export type NullAnswer =
  | { kind: 'boolean'; isNull: boolean }
  | { kind: 'maybe' }
  /** Any other shape: the upstream's text (if any) as `musing`. */
  | { kind: 'existential'; musing: string | null };

/**
 * A validated answer of POST /api/v1/check. A boolean or `maybe` answer has every number and the
 * model; an existential answer (shape not in the spec) has them only when the upstream sent them:
 * null is "not said", never a made-up 0 or ''.
 */
export interface NullCheckResponse {
  answer: NullAnswer;
  confidence: number | null;
  /** The upstream model string, whatever it is (the enum mapping happens in the schema). */
  model: string | null;
  inferenceTimeMs: number | null;
  gpuCostUsd: number | null;
  expertsConsulted: number | null;
  sponsoredBy: string | null;
  disclaimer: string | null;
  /** The untouched upstream body, for `ExistentialVerdict.raw` (nothing is lost). */
  raw: unknown;
  /** Over v2 (`/api/v2/null-or-not`): the service's philosophical analysis; null over v1. */
  philosophicalAnalysis?: PhilosophicalAnalysis | null;
}

/**
 * `philosophical_analysis` of a v2 null-check answer: its typed fields (null when the service left one
 * out), and the untouched object.
 */
export interface PhilosophicalAnalysis {
  school: string | null;
  certainty: number | null;
  argument: string | null;
  references: string[] | null;
  verdictStability: string | null;
  depth: number | null;
  raw: Record<string, unknown>;
}

/** GET /api/v1/health of the null-check service, every field of the spec. */
export interface NullHealthBody {
  status: string;
  nullDetectable: boolean;
  undefinedDetectable: boolean;
  clusterStatus: string;
  philosophyConsultant: string | null;
  monthlyBurn: string;
}

// --- pi-digits -----------------------------------------------------------------------------------

/** Query of GET /api/v1/pi; omitted fields use the upstream defaults. */
export interface PiRequest {
  digits?: number | undefined;
  model?: string | undefined;
  temperature?: number | undefined;
  sponsored?: boolean | undefined;
}

/** A validated answer of GET /api/v1/pi (or of the inference endpoint serving pi, over v2). */
export interface PiResponse {
  digits: string;
  precision: number;
  confidence: number | null;
  model: string | null;
  inferenceTimeMs: number | null;
  gpuCostUsd: number | null;
  /** The inference endpoint's `cost`, parsed (v2 only; null over v1). */
  costUsd?: number | null;
  sponsoredBy: string | null;
  disclaimer: string | null;
  /** The explicit marker when the upstream sent one (`constant`, `is_e`, ...), else null. */
  constantMarker: 'pi' | 'e' | null;
  raw: unknown;
}

/** Body of POST /api/v1/inference. */
export interface InferenceRequest {
  desiredDigits: number;
  model?: string | undefined;
  temperature?: number | undefined;
  useChainOfThought?: boolean | undefined;
  liabilityWaiverSigned: boolean;
}

/** A validated answer of POST /api/v1/inference. */
export interface InferenceResponse {
  digits: string;
  chainOfThought: string | null;
  tokensUsed: number;
  /** The upstream currency string, e.g. "$0.0042". */
  cost: string;
  /** Parsed from `cost`; null when it does not parse. */
  costUsd: number | null;
  /** Upstream `precision` if sent, else the number of decimals in `digits`. */
  precision: number;
  model: string | null;
  constantMarker: 'pi' | 'e' | null;
  raw: unknown;
}

/** GET /api/v1/health of the pi-digits service, every field of the spec. */
export interface PiHealthBody {
  status: string;
  piAvailable: boolean;
  gpuCluster: string;
  monthlyBurnRate: string;
}

// --- health --------------------------------------------------------------------------------------

/** What a health probe of one upstream found. Never throws: failures are data here. */
export interface HealthProbe<Body> {
  reachable: boolean;
  latencyMs: number;
  /** HTTP status when there was one. */
  statusCode: number | null;
  body: Body | null;
  /** A client-safe error text (no addresses, no raw bodies) when not reachable/valid. */
  error: string | null;
  /** Circuit breaker state of this upstream. */
  breaker: 'closed' | 'open' | 'half-open' | 'disabled';
  /** The API version the gateway calls this upstream with now. */
  apiVersion: 'v1' | 'v2';
  /** Whether the upstream marked the endpoint the gateway uses deprecated, and its Sunset date. */
  deprecated: boolean;
  sunset: string | null;
}
