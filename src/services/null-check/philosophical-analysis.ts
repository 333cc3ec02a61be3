/**
 * The `philosophical_analysis` of `POST /api/v2/null-or-not` (the spec promises "a structured
 * philosophical analysis in addition to the boolean" and shows nothing more; this is the project's
 * design). A pure function of the verdict, the model, the temperature and the service's seeded dice,
 * so a seed reproduces it like every other field.
 *
 * - `school`: the verdict's school of thought. Boolean answers: the model's own (mini `pragmatism`,
 *   4o `analytic`, opus `analytic` or `logical-positivism`), drifting to `phenomenology` with
 *   probability t/2 above temperature 0; `"maybe"`: `phenomenology` or `pragmatism`; existential:
 *   `existentialism`, `nihilism` or `absurdism`.
 * - `certainty` (0..1): boolean answers within the model's range times (1 − t/2); `"maybe"` 0.3–0.6
 *   times (1 − 0.3·t); existential below 0.15.
 * - `argument`: one sentence in the school's voice about this verdict.
 * - `references`: distinct works cited, as many as the model reads (mini 1, 4o 2, opus 4), one more
 *   above temperature 0.7.
 * - `verdict_stability`: `settled` at temperature 0 (the same value always gets the same verdict),
 *   `dissolved` for an existential answer, `wavering` otherwise. No dice.
 * - `depth` (1..7): levels of regress followed: the model's base (mini 1, 4o 2, opus 4) plus
 *   round(3·t). No dice.
 */
import type { SeededRandom } from '../shared/seeded-random.js';
import type { NullAnswer, NullModel } from './null-models.js';

export const SCHOOLS = [
  'analytic',
  'logical-positivism',
  'pragmatism',
  'phenomenology',
  'existentialism',
  'nihilism',
  'absurdism',
] as const;
export type School = (typeof SCHOOLS)[number];

export const VERDICT_STABILITIES = ['settled', 'wavering', 'dissolved'] as const;
export type VerdictStability = (typeof VERDICT_STABILITIES)[number];

export interface PhilosophicalAnalysis {
  school: School;
  certainty: number;
  argument: string;
  references: string[];
  verdict_stability: VerdictStability;
  depth: number;
}

interface ModelTraits {
  schools: readonly School[];
  certainty: readonly [number, number];
  references: number;
  depth: number;
}

const MODEL_TRAITS: Record<NullModel, ModelTraits> = {
  'null-x-mini': { schools: ['pragmatism'], certainty: [0.55, 0.8], references: 1, depth: 1 },
  'null-x-4o': { schools: ['analytic'], certainty: [0.85, 0.97], references: 2, depth: 2 },
  'null-x-opus': {
    schools: ['analytic', 'logical-positivism'],
    certainty: [0.9, 0.995],
    references: 4,
    depth: 4,
  },
};

/** Most references one analysis cites (opus above temperature 0.7). */
export const MAX_REFERENCES = 5;
/** Deepest regress (opus at temperature 1). */
export const MAX_DEPTH = 7;

export const REFERENCES = [
  'Hoare, "Null References: The Billion Dollar Mistake" (2009)',
  'Frege, "On Sense and Reference" (1892)',
  'Russell, "On Denoting" (1905)',
  'Wittgenstein, "Tractatus Logico-Philosophicus", proposition 7 (1921)',
  'Heidegger, "What Is Metaphysics?" (1929)',
  'Sartre, "Being and Nothingness" (1943)',
  'Camus, "The Myth of Sisyphus" (1942)',
  'Parmenides, "On Nature", fragment 2',
  'ECMA-262, IsStrictlyEqual',
  'RFC 8259, section 3: the literal name null',
] as const;

/** One sentence per template; `%` is replaced by the verdict ("is null", "may or may not be null", ...). */
const ARGUMENTS: Record<School, readonly string[]> = {
  analytic: [
    'Under strict equality the proposition is decidable, and it was decided: the value %.',
    'Strip the question of its metaphors and one comparison remains; by it, the value %.',
  ],
  'logical-positivism': [
    'Only what can be verified is meaningful, and the comparison was verified: the value %.',
    'The statement "the value %" is empirically checkable, and checked.',
  ],
  pragmatism: [
    'What matters is what the answer does for the caller: for all practical purposes the value %.',
    'It walks like nothing and quacks like nothing; whatever else it is, in practice the value %.',
  ],
  phenomenology: [
    'Bracketing every assumption about types, the value as it appears to us %.',
    'The null-ness of a value is given only in its being checked; as experienced here, the value %.',
  ],
  existentialism: [
    'The value was thrown into the request without a type to lean on; condemned to be free, it %.',
    'Existence precedes essence: the value exists, and that is all; it %.',
  ],
  nihilism: [
    'Every value is null in the end; until then this one %.',
    'Nothing in a payload is truly present, so this value, like all others, %.',
  ],
  absurdism: [
    'We must imagine the checker happy: it asks again and again, and the value %.',
    'The caller wants certainty and the model offers none; in that gap the value %.',
  ],
};

function verdictText(answer: NullAnswer): string {
  if (answer.kind === 'boolean') return answer.isNull ? 'is null' : 'is not null';
  if (answer.kind === 'maybe') return 'may or may not be null';
  return 'cannot be said to be null or not null';
}

/** `count` distinct items of `items`, in the order drawn. */
function pickDistinct<T>(items: readonly T[], count: number, random: SeededRandom): T[] {
  const pool = [...items];
  const out: T[] = [];
  while (out.length < count && pool.length > 0) {
    const [item] = pool.splice(random.int(0, pool.length - 1), 1);
    out.push(item as T);
  }
  return out;
}

/** The analysis of one answer; draws from `random` (after the answer's own draws). */
export function analyse(
  answer: NullAnswer,
  model: NullModel,
  temperature: number,
  random: SeededRandom,
): PhilosophicalAnalysis {
  const traits = MODEL_TRAITS[model];
  let school: School;
  let certainty: number;
  if (answer.kind === 'existential') {
    school = random.pick(['existentialism', 'nihilism', 'absurdism'] as const);
    certainty = random.between(0, 0.15);
  } else if (answer.kind === 'maybe') {
    school = random.pick(['phenomenology', 'pragmatism'] as const);
    certainty = random.between(0.3, 0.6) * (1 - 0.3 * temperature);
  } else {
    const drifts = temperature > 0 && random.next() < temperature / 2;
    school = drifts ? 'phenomenology' : random.pick(traits.schools);
    certainty = random.between(traits.certainty[0], traits.certainty[1]) * (1 - 0.5 * temperature);
  }
  const template = random.pick(ARGUMENTS[school]);
  const references = pickDistinct(REFERENCES, traits.references + (temperature > 0.7 ? 1 : 0), random);
  return {
    school,
    certainty: Math.round(certainty * 10_000) / 10_000,
    argument: template.replace('%', verdictText(answer)),
    references,
    verdict_stability:
      temperature <= 0 ? 'settled' : answer.kind === 'existential' ? 'dissolved' : 'wavering',
    depth: traits.depth + Math.round(3 * temperature),
  };
}
