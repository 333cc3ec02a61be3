import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSeededRandom, type SeededRandom } from '../../src/services/shared/seeded-random.js';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import {
  type HandlerServer,
  HEADERS_CLIENTS_ACT_ON,
  listenHandler,
  type RawAnswer,
  sendRaw,
} from '../support/raw-http.js';
import { nullBody, nullHealth, piBody, piHealth } from '../support/upstream-bodies.js';

const SEED = Number(process.env.LIFTING_SEED ?? 0x11f7_ed00) >>> 0;
/** Documents compared, at least. */
const DOCUMENTS = Math.max(400, Number(process.env.LIFTING_DOCUMENTS ?? 0));

type Random = SeededRandom;

type Kind = 'Int' | 'Float' | 'String' | 'BlockString';

/** Values the scripted upstream answers with an error (a field error located in the document). */
const FAILING = ['tier', 'paradox', 'down', 'bad', 'key', 'maybe-please', 'existential'];
const STRINGS = [
  '"a"',
  '""',
  '"\\u00e9 \\" \\\\ \\n \\t"',
  '"# not a comment"',
  '"🎉 \\uD83C\\uDF89"',
  '"\\u{1F600}"',
  '"{ } ( ) $ @ ..."',
  '"\\u0000"',
];
const BLOCK_STRINGS = [
  '"""a"""',
  '""""""',
  '"""\n  multi\n    line\n"""',
  '"""with \\""" inside"""',
  '"""\r\n  tier\r\n"""',
  '"""\n\n\n  paradox\n\n"""',
];

function literal(kind: Kind, r: Random): string {
  const x = r.next();
  switch (kind) {
    case 'Int':
      if (x < 0.5) return String(r.int(0, 9));
      if (x < 0.7) return String(r.int(-5, -1));
      if (x < 0.8) return r.pick(['7', '2147483647', '-2147483648', '-0']);
      if (x < 0.9) return r.pick(['2147483648', '99999999999', '-2147483649']);
      return String(r.int(10, 1_000_000));
    case 'Float':
      if (x < 0.5) return r.pick(['0.5', '0.25', '1.0', '0.0', '-0.0', '0.125e1']);
      if (x < 0.75) return `${r.int(-3, 3)}.${r.int(0, 999)}`;
      if (x < 0.9) return r.pick(['2.5e3', '1E-2', '1.7976931348623157e308', '1e-999']);
      return r.pick(['1e999', '-1e999']);
    case 'String':
      if (x < 0.35) return `"${r.pick(FAILING)}"`;
      if (x < 0.8) return r.pick(STRINGS);
      return `"s${r.int(0, 1_000_000)}"`;
    case 'BlockString':
      if (x < 0.8) return r.pick(BLOCK_STRINGS);
      return `"""b${r.int(0, 1_000)}"""`;
  }
}

interface Template {
  name: string;
  /** Text with holes `<Int>`, `<Float>`, `<String>`, `<BlockString>`. */
  text: string;
  /** The request's variables (some families also give none, or wrong ones). */
  variables?: (r: Random) => Record<string, unknown> | undefined;
  operationName?: string;
}

const TEMPLATES: Template[] = [
  {
    name: 'isNull of a string',
    text: '{ isNull(value: <String>) { __typename ... on NullCheck { actuallyNull correct } ... on MaybeVerdict { answer } } }',
  },
  {
    name: 'isNull of a block string, then pi: the block string moves the lines after it',
    text: 'query Q {\n  a: isNull(value: <BlockString>) { __typename }\n  b: pi(digits: <Int>) {\n    __typename ... on ConstantDigits { digits precision }\n  }\n}',
    operationName: 'Q',
  },
  {
    name: 'JSON numbers and float arguments',
    text: '{ n: isNull(value: <Int>, temperature: <Float>) { __typename } p: pi(digits: 2, temperature: <Float>) { __typename } }',
  },
  {
    name: 'an input object of literals',
    text: '{ inference(input: { desiredDigits: <Int>, liabilityWaiverSigned: false, temperature: <Float> }) { __typename } }',
  },
  {
    name: 'an input object, waiver signed',
    text: '# <- a comment\n{ inference(input: { desiredDigits: <Int>, liabilityWaiverSigned: true }) { __typename ... on Inference { digits } } }',
  },
  {
    name: 'a fragment with literals, beside client variables',
    text: 'query V($d: Int, $m: PiModel) { pi(digits: $d, model: $m) { __typename } ...F }\nfragment F on Query { x: isNull(value: <String>, strictMode: false, model: NULL_X_MINI) { __typename } y: inference(input: { desiredDigits: <Int>, liabilityWaiverSigned: true }) { __typename } }',
    variables: (r) => {
      const x = r.next();
      if (x < 0.6) return { d: r.int(0, 9), m: 'PI_X_MINI' };
      if (x < 0.75) return undefined;
      if (x < 0.9) return { d: 'five' };
      return { d: 2, m: 'NOT_A_MODEL', unused: [1] };
    },
  },
  {
    name: 'a required variable, missing or given, defined after literals',
    text: 'fragment F on Query { a: isNull(value: <BlockString>) { __typename } }\nquery R($v: Int!) { ...F c: pi(digits: $v, temperature: <Float>) { __typename } }',
    variables: (r) => (r.next() < 0.3 ? undefined : { v: r.pick(['tier', null, 3, -1, 7]) }),
  },
  {
    name: 'a default value (kept) and a literal list inside JSON (kept)',
    text: 'query D($d: Int = 2) { pi(digits: $d, temperature: <Float>) { __typename } a: isNull(value: [1, "x", null], minAccuracy: <Float>) { __typename } }',
  },
  {
    name: 'a default value written differently (not lifted)',
    text: 'query E($d: Int = <Int>) { pi(digits: $d) { __typename } b: isNull(value: <String>) { __typename } }',
  },
  {
    name: 'upstream fields of one name: one call when their literals print alike (then not lifted)',
    text: '{ a: pi(digits: <Int>) { __typename } b: pi(digits: <Int>) { __typename } c: isNull(value: "x") { __typename } d: isNull(value: <String>) { __typename } }',
  },
  {
    name: 'two operations (bench:path literal), a literal in the other one checked',
    text: 'fragment N on NullCheck { __typename sponsoredBy ... on NullVerdict { isNull } }\nquery IsNull { isNull(value: <String>) { ...N } }\nquery Other { isNull(value: <Int>) { ...N } }',
    operationName: 'IsNull',
  },
  {
    name: 'minAccuracy beside a model, and include/skip kept',
    text: '{ isNull(value: <Int>, model: NULL_X_MINI, minAccuracy: <Float>) { __typename } __typename @include(if: true) health @skip(if: true) { status } }',
  },
];

function render(template: Template, r: Random): string {
  return template.text.replace(/<(Int|Float|String|BlockString)>/g, (_, kind: Kind) => literal(kind, r));
}

/** The literals the first two documents of a family use: valid, so that they teach the shape. */
function teaching(template: Template, i: number): string {
  const values: Record<Kind, string[]> = {
    Int: ['1', '2'],
    Float: ['0.5', '0.25'],
    String: ['"first"', '"second"'],
    BlockString: ['"""first"""', '"""second"""'],
  };
  return template.text.replace(
    /<(Int|Float|String|BlockString)>/g,
    (_, kind: Kind) => values[kind][i] as string,
  );
}

const HEADERS_THAT_MATTER = HEADERS_CLIENTS_ACT_ON;
const ESTIMATE = /"estimatedCostUsd":-?\d+(?:\.\d+)?(?:e-\d+)?/g;
const SCORES = /"accuracyLowerBound":[-\d.e]+,"answers":\d+/g;
const comparable = (answer: RawAnswer) => {
  const headers = Object.fromEntries(HEADERS_THAT_MATTER.map((h) => [h, answer.headers[h]]));
  // The estimate follows the running mean of observed costs, which the earlier requests moved.
  let body = answer.body;
  if (body.includes('"estimatedCostUsd":')) {
    expect(headers['content-length']).toBe(String(Buffer.byteLength(body)));
    headers['content-length'] = 'its body length';
    body = body.replace(ESTIMATE, '"estimatedCostUsd":"a number"');
  }
  // Routing by quality reads the scoreboard, which every answer before moved.
  if (body.includes('"accuracyLowerBound":')) {
    headers['content-length'] = 'its body length';
    body = body.replace(SCORES, '"accuracyLowerBound":"a number","answers":"a count"');
  }
  return { status: answer.status, headers, body };
};

let upstream: ScriptedUpstream;
let gateway: TestGateway;
let yogaOnly: HandlerServer | undefined;
let gatewayPort = 0;
let yogaPort = 0;

beforeAll(async () => {
  upstream = await startScriptedUpstream();
  upstream.route('POST', '/api/v1/check', (req) => {
    const body = req.body as { value?: unknown };
    const value = typeof body.value === 'string' ? body.value.trim() : body.value;
    switch (value) {
      case 'maybe-please':
        return { body: nullBody({ is_null: 'maybe', sponsored_by: 'Sponsor M' }) };
      case 'existential':
        return { body: nullBody({ is_null: 'the void stares back', sponsored_by: 'Sponsor E' }) };
      case 'tier':
        return { status: 418 };
      case 'paradox':
        return { status: 500 };
      case 'down':
        return { status: 503 };
      case 'bad':
        return { body: nullBody({ confidence: 'high' }) };
      case 'key':
        return { status: 401 };
      default:
        // The value as the upstream got it, in the answer (extensions.sponsoredBy): coercion shows.
        return {
          body: nullBody({
            is_null: body.value === null,
            sponsored_by: `Sponsor ${JSON.stringify(body.value)}`,
          }),
        };
    }
  });
  upstream.route('GET', '/pi-prefix/api/v1/pi', (req) => {
    const digits = Number(req.query.digits ?? 3);
    if (digits === 7) return { status: 502 };
    return {
      body: piBody({
        digits: '3.14159265358979323846'.slice(0, digits === 0 ? 1 : digits + 2),
        precision: digits,
        sponsored_by: 'Sponsor P',
      }),
    };
  });
  upstream.route('POST', '/pi-prefix/api/v1/inference', (req) => {
    const digits = (req.body as { desired_digits: number }).desired_digits;
    return {
      body: {
        digits: '3.14159265358979323846'.slice(0, digits + 2),
        chain_of_thought: 'I recall.',
        tokens_used: 20,
        cost: '$0.0004',
      },
    };
  });
  upstream.route('GET', '/api/v1/health', { body: nullHealth });
  upstream.route('GET', '/pi-prefix/api/v1/health', { body: piHealth });
  gateway = await startTestGateway({
    nullBaseUrl: upstream.url,
    piBaseUrl: `${upstream.url}/pi-prefix`,
    // Deterministic answers: no retries, no breaker (both handlers must see the same upstream).
    env: { RETRY_MAX_ATTEMPTS: '1', BREAKER_THRESHOLD: '0' },
  });
  gatewayPort = Number(new URL(gateway.origin).port);
  yogaOnly = await listenHandler(gateway.app.yoga);
  yogaPort = yogaOnly.port;
});

afterAll(async () => {
  await yogaOnly?.close();
  await gateway?.close();
  await upstream?.close();
});

let requestId = 0;
const request = (query: string, variables: Record<string, unknown> | undefined, operationName?: string) => ({
  headers: {
    'content-type': 'application/json',
    accept: 'application/graphql-response+json',
    'x-request-id': `lifting-${++requestId}`,
  },
  body: JSON.stringify({ query, variables, operationName }),
});

describe('documents lifted into their shape’s operation answer as the documents themselves', () => {
  it(`${DOCUMENTS} generated documents over ${TEMPLATES.length} shapes, seed ${SEED}`, async () => {
    const r = createSeededRandom(SEED);
    const served = gateway.app.fastPath.served;
    const lifted = { before: served.lifted, per: new Map<string, number>() };
    const mismatches: unknown[] = [];
    let documents = 0;
    while (documents < DOCUMENTS) {
      for (const template of TEMPLATES) {
        const first = served.lifted;
        // Two valid documents teach the shape (prepared-operations.ts: learnt at the second).
        for (const i of [0, 1])
          await sendRaw(gatewayPort, request(teaching(template, i), undefined, template.operationName));
        for (let i = 0; i < 8; i++) {
          const query = render(template, r);
          const variables = template.variables?.(r);
          // A first request, so that both handlers then see the same cache and scoreboard.
          const sent = request(query, variables, template.operationName);
          await sendRaw(gatewayPort, sent);
          const fast = await sendRaw(gatewayPort, sent);
          const yoga = await sendRaw(yogaPort, sent);
          documents++;
          const a = comparable(fast);
          const b = comparable(yoga);
          if (JSON.stringify(a) !== JSON.stringify(b) && mismatches.length < 3)
            mismatches.push({
              replay: `LIFTING_SEED=${SEED}`,
              template: template.name,
              query: JSON.stringify(query),
              variables,
              fast: a,
              yoga: b,
            });
        }
        lifted.per.set(template.name, (lifted.per.get(template.name) ?? 0) + served.lifted - first);
      }
    }
    console.info(
      `lifting (seed ${SEED}): ${documents} documents, lifted ${served.lifted - lifted.before} of ${2 * documents} sends: ${JSON.stringify(Object.fromEntries(lifted.per))}`,
    );
    expect(mismatches, `LIFTING_SEED=${SEED}: answers that differ`).toEqual([]);
    // Not vacuous: most documents were lifted, of every shape (but one whose default value varies).
    expect(served.lifted - lifted.before).toBeGreaterThan(documents);
    expect(lifted.per.get(TEMPLATES[0]?.name as string)).toBeGreaterThan(0);
    expect(lifted.per.get(TEMPLATES[1]?.name as string)).toBeGreaterThan(0);
    for (const [i, template] of TEMPLATES.entries())
      if (i !== 8) expect(lifted.per.get(template.name), template.name).toBeGreaterThan(0);
  }, 120_000);
});
