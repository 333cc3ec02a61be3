/**
 * Models measured against the truth (docs/graphql.md, Models): every answer a model gives is scored
 * against what the gateway knows to be true, per service, model and temperature band, and the sums
 * are kept in the shared state's score store (memory, or one Redis hash every replica adds to).
 *
 * Where answers are scored: the upstream observer's outermost layer (observability/upstream-observer.ts),
 * for answers whose source is the upstream itself. A response cache hit, a call shared in flight
 * (single flight, another replica's) and a DataLoader share within one operation never reach it as
 * an upstream answer, so no answer is scored twice. The truth travels with the call
 * (`UpstreamRequest.truth`, set by the clients from the request they send): whether the value was
 * strictly null, how many digits of pi were asked for.
 *
 * Verdicts: a null check is correct when its boolean answer equals the truth (`maybe` and
 * existential answers count as answers, never as correct); digits are correct when they are pi (not
 * e) and every requested decimal place is right. Judging digits may need the digit engine (a
 * promise): it runs after the answer has been delivered, off the request path.
 */
import type { DigitEngine } from '../../digits/digit-engine.js';
import type { UpstreamName } from '../errors.js';
import type { ScoreStore } from '../shared-state/types.js';
import type { ObservedAnswer } from '../upstream/dispatch.js';
import { classifyDigits, correctDigits, splitDigits } from './truth.js';
import { wilsonLowerBound } from './wilson.js';

/** The temperature bands answers are scored in; an omitted temperature is the band of 0. */
export const BANDS = ['0', '(0, 0.7]', '(0.7, 1]'] as const;
export type Band = (typeof BANDS)[number];

/** The band of a temperature (0 to 1; omitted: 0). */
export function bandOf(temperature: number | undefined): Band {
  if (temperature === undefined || temperature <= 0) return '0';
  return temperature <= 0.7 ? '(0, 0.7]' : '(0.7, 1]';
}

/** What one answer was, against the truth (the `outcome` label of gateway_model_answers_total). */
export type AnswerOutcome = 'correct' | 'incorrect' | 'maybe' | 'existential' | 'e_instead_of_pi';

/** One row of the scoreboard: a model of a service at one band. */
export interface ModelScore {
  service: UpstreamName;
  model: string;
  band: Band;
  answers: number;
  correct: number;
  maybe: number;
  existential: number;
  eInsteadOfPi: number;
  /** correct / answers. */
  accuracy: number;
  /** The lower bound of the 95 % Wilson interval of `accuracy`. */
  accuracyLowerBound: number;
  meanCostUsd: number;
  meanLatencyMs: number;
}

export interface ScoreboardOptions {
  store: ScoreStore;
  digits: DigitEngine;
  /** Most decimal places compared with the true constant (the gateway's MAX_DIGITS, capped by the engine). */
  maxCompareDigits: number;
  /** Told of each answer scored (gateway_model_answers_total). */
  onScored?: ((service: UpstreamName, model: string, band: Band, outcome: AnswerOutcome) => void) | undefined;
  /** Told of a judgement that failed (the digit engine refused): the answer is then not scored. */
  onError?: ((error: unknown) => void) | undefined;
}

export interface Scoreboard {
  /** Scores an upstream answer (at once for a null check, after the digit engine for digits). */
  record(answer: ObservedAnswer): void;
  /** The row of a model at a band, from this process' view (no I/O); undefined before any answer. */
  score(service: UpstreamName, model: string, band: Band): ModelScore | undefined;
  /** Every row, from this process' view (no I/O), by service, model and band. */
  rows(): ModelScore[];
  /** Every row after one exchange with the shared store (every replica's answers so far). */
  read(): Promise<ModelScore[]>;
}

/** Most distinct (service, model) pairs scored: model strings come from requests' enums, this is a guard. */
const MAX_MODELS = 32;

/** The sums kept per row, by their field suffix in the store. */
const STATS = {
  answers: 'n',
  correct: 'c',
  maybe: 'm',
  existential: 'x',
  eInsteadOfPi: 'e',
  costUsd: 'u',
  latencyMs: 'l',
} as const;

type Stat = keyof typeof STATS;
/** The sums of one row, by stat (0 for a sum never added to). */
type Sums = Record<Stat, number>;

/** The stat of each field suffix. */
const STAT_OF_SUFFIX = new Map(
  Object.entries(STATS).map(([stat, suffix]) => [suffix as string, stat as Stat]),
);

const fieldOf = (service: string, model: string, band: Band, stat: string) =>
  `${service}|${model}|${band}|${stat}`;

/**
 * A row from its sums; undefined without answers. The counts are whole (each answer adds 1), the
 * means exact (routing compares them).
 */
function rowOf(service: UpstreamName, model: string, band: Band, sums: Sums): ModelScore | undefined {
  const answers = Math.round(sums.answers);
  if (answers <= 0) return undefined;
  const correct = Math.round(sums.correct);
  return {
    service,
    model,
    band,
    answers,
    correct,
    maybe: Math.round(sums.maybe),
    existential: Math.round(sums.existential),
    eInsteadOfPi: Math.round(sums.eInsteadOfPi),
    accuracy: correct / answers,
    accuracyLowerBound: wilsonLowerBound(correct, answers),
    meanCostUsd: sums.costUsd / answers,
    meanLatencyMs: sums.latencyMs / answers,
  };
}

/** The verdict of a null-check answer. */
function judgeNull(truth: { actuallyNull: boolean }, value: unknown): AnswerOutcome {
  const answer = (value as { answer?: { kind?: string; isNull?: boolean } } | null)?.answer;
  if (answer?.kind === 'boolean') return answer.isNull === truth.actuallyNull ? 'correct' : 'incorrect';
  return answer?.kind === 'maybe' ? 'maybe' : 'existential';
}

export function createScoreboard(options: ScoreboardOptions): Scoreboard {
  const { store, digits, maxCompareDigits, onScored, onError } = options;
  /** Distinct (service, model) pairs scored so far. */
  let models = 0;

  /** The verdict of a digits answer: pi, and every requested place right. */
  const judgeDigits = async (requested: number, value: unknown): Promise<AnswerOutcome> => {
    const answer = value as { digits?: unknown; constantMarker?: unknown };
    const text = typeof answer.digits === 'string' ? answer.digits : '';
    const marker =
      answer.constantMarker === 'pi' || answer.constantMarker === 'e' ? answer.constantMarker : null;
    // The member the schema answers with (truth.ts): the upstream's marker, else the integer part.
    if (classifyDigits(text, marker) === 'e') return 'e_instead_of_pi';
    if (splitDigits(text).integer !== '3') return 'incorrect';
    const needed = Math.min(requested, maxCompareDigits);
    if (needed <= 0) return 'correct';
    const right = await correctDigits(digits, text, 'pi', maxCompareDigits);
    return right >= needed ? 'correct' : 'incorrect';
  };

  /**
   * The store's field names of each row, made once: scoring an answer then costs a few map updates
   * and no string building (it runs on every upstream answer). Undefined past MAX_MODELS.
   */
  const fieldNames = new Map<string, Map<string, Record<Band, Record<keyof typeof STATS, string>>>>();
  const fieldsOf = (service: string, model: string, band: Band) => {
    let byModel = fieldNames.get(service);
    if (byModel === undefined) {
      byModel = new Map();
      fieldNames.set(service, byModel);
    }
    let byBand = byModel.get(model);
    if (byBand === undefined) {
      if (models >= MAX_MODELS) return undefined;
      models++;
      const named = (b: Band) =>
        Object.fromEntries(
          Object.entries(STATS).map(([stat, suffix]) => [stat, fieldOf(service, model, b, suffix)]),
        ) as Record<keyof typeof STATS, string>;
      byBand = { '0': named('0'), '(0, 0.7]': named('(0, 0.7]'), '(0.7, 1]': named('(0.7, 1]') };
      byModel.set(model, byBand);
    }
    return byBand[band];
  };

  const add = (answer: ObservedAnswer, band: Band, outcome: AnswerOutcome) => {
    const { upstream: service, model } = answer.call;
    const fields = fieldsOf(service, model, band);
    if (fields === undefined) return;
    store.add(fields.answers, 1);
    if (outcome === 'correct') store.add(fields.correct, 1);
    else if (outcome === 'maybe') store.add(fields.maybe, 1);
    else if (outcome === 'existential') store.add(fields.existential, 1);
    else if (outcome === 'e_instead_of_pi') store.add(fields.eInsteadOfPi, 1);
    store.add(fields.costUsd, answer.costUsd);
    store.add(fields.latencyMs, answer.latencyMs);
    onScored?.(service, model, band, outcome);
  };

  const rowsOf = (totals: ReadonlyMap<string, number>): ModelScore[] => {
    const sumsByRow = new Map<string, { service: string; model: string; band: Band; sums: Sums }>();
    for (const [field, amount] of totals) {
      const [service, model, band, suffix] = field.split('|');
      if (service === undefined || model === undefined || suffix === undefined) continue;
      if (!(BANDS as readonly string[]).includes(band as string)) continue;
      const stat = STAT_OF_SUFFIX.get(suffix);
      if (stat === undefined) continue;
      const key = `${service}|${model}|${band}`;
      let row = sumsByRow.get(key);
      if (row === undefined) {
        const sums = Object.fromEntries(Object.keys(STATS).map((name) => [name, 0])) as Sums;
        row = { service, model, band: band as Band, sums };
        sumsByRow.set(key, row);
      }
      row.sums[stat] = amount;
    }
    const out: ModelScore[] = [];
    for (const { service, model, band, sums } of sumsByRow.values()) {
      const row = rowOf(service as UpstreamName, model, band, sums);
      if (row === undefined) continue;
      // Rounded for reading: a sum of dollars or milliseconds divided carries float noise.
      row.meanCostUsd = Math.round(row.meanCostUsd * 1e10) / 1e10;
      row.meanLatencyMs = Math.round(row.meanLatencyMs * 100) / 100;
      out.push(row);
    }
    return out.sort(
      (a, b) =>
        a.service.localeCompare(b.service) ||
        a.model.localeCompare(b.model) ||
        BANDS.indexOf(a.band) - BANDS.indexOf(b.band),
    );
  };

  return {
    record(answer) {
      const { truth } = answer;
      const band = bandOf(truth.temperature);
      if (truth.question === 'null') {
        add(answer, band, judgeNull(truth, answer.value));
        return;
      }
      judgeDigits(truth.requestedDigits, answer.value).then(
        (outcome) => add(answer, band, outcome),
        (error: unknown) => onError?.(error),
      );
    },

    score(service, model, band) {
      const totals = store.totals();
      const sums = Object.fromEntries(
        Object.entries(STATS).map(([stat, suffix]) => [
          stat,
          totals.get(fieldOf(service, model, band, suffix)) ?? 0,
        ]),
      ) as Sums;
      return rowOf(service, model, band, sums);
    },

    rows: () => rowsOf(store.totals()),
    read: async () => rowsOf(await store.read()),
  };
}
