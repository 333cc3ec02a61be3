/**
 * A real scoreboard of the reference services' models (docs/models.md):
 * `npx tsx scripts/models-scoreboard.ts [calls per model and band, default 200]`.
 *
 * Starts the embedded default (`startGateway`: the reference services in process, on loopback, as
 * `npm start` does without upstream URLs), asks every model of both services `calls` times in each
 * temperature band with the demo-enterprise key (the free tier's 60 requests a minute would take an
 * hour; the reference services do not limit enterprise keys), then prints the `models` scoreboard and
 * what routing by minAccuracy 0.99, 0.9 and 0.5 answers with and costs against the default model, as
 * Markdown. Upstream URLs in the environment (NULL_BASE_URL, PI_BASE_URL) are used instead when set.
 */
import { loadConfig } from '../src/config.js';
import { startGateway } from '../src/embedded-services.js';
import { BANDS, type Band, type ModelScore } from '../src/gateway/models/scoreboard.js';
import { createLogger } from '../src/shared/logger.js';

const CALLS = Math.max(1, Math.min(Number(process.argv[2] ?? 200) || 200, 2000));
const KEY = process.env.SCOREBOARD_API_KEY ?? 'demo-enterprise';
const IN_FLIGHT = 8;
/** Temperatures cycled through in each band (the scoreboard's bands, src/gateway/models/scoreboard.ts). */
const TEMPERATURES: Record<Band, number[]> = {
  '0': [0],
  '(0, 0.7]': [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7],
  '(0.7, 1]': [0.8, 0.9, 1],
};
/** Values asked about: a third null, the rest the usual suspects. */
const VALUES = ['null', '0', '""', 'false', '"null"', '[]', '{}', 'null', '1', '"x"', '[null]', 'null'];
const NULL_MODELS = ['NULL_X_4O', 'NULL_X_MINI', 'NULL_X_OPUS'];
const PI_MODELS = ['PI_X_4O', 'PI_X_MINI', 'PI_X_OPUS_ALMOST_CORRECT'];

interface Answer {
  data?: Record<string, { modelName?: string } | null> | null;
  errors?: Array<{ message: string; extensions?: { code?: string } }>;
  extensions?: { cost?: { routing?: Array<{ model: string; accuracyLowerBound: number | null }> } };
}

async function main(): Promise<void> {
  const config = loadConfig({ NODE_ENV: 'production', ...process.env, PORT: '0' });
  const app = await startGateway(config, { logger: createLogger({ level: 'warn' }), defaultMetrics: false });
  const url = await app.listen(0, '127.0.0.1');
  const post = async (query: string): Promise<Answer> => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ query }),
    });
    return (await response.json()) as Answer;
  };

  const queries: string[] = [];
  for (const band of BANDS) {
    const temperatures = TEMPERATURES[band];
    for (let i = 0; i < CALLS; i++) {
      const t = temperatures[i % temperatures.length];
      const value = VALUES[i % VALUES.length];
      const digits = 5 + (i % 16);
      for (const model of NULL_MODELS)
        queries.push(`{ isNull(value: ${value}, model: ${model}, temperature: ${t}) { __typename } }`);
      for (const model of PI_MODELS)
        queries.push(`{ pi(digits: ${digits}, model: ${model}, temperature: ${t}) { __typename } }`);
    }
  }
  const failures = new Map<string, number>();
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < queries.length) {
        const answer = await post(queries[next++] as string);
        for (const error of answer.errors ?? []) {
          const code = error.extensions?.code ?? 'OTHER';
          failures.set(code, (failures.get(code) ?? 0) + 1);
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  // The last digits answers are judged just after they went out.
  await new Promise((resolve) => setTimeout(resolve, 200));

  const rows = ((
    await post(
      '{ models { service model band answers correct maybe existential eInsteadOfPi accuracy accuracyLowerBound meanCostUsd meanLatencyMs } }',
    )
  ).data?.models ?? []) as unknown as ModelScore[];
  const out: string[] = [];
  out.push(
    `${queries.length} calls (${CALLS} per model and band) in ${seconds.toFixed(1)} s; failed: ${failures.size === 0 ? 'none' : JSON.stringify(Object.fromEntries(failures))}`,
    '',
    '| service | model | band | answers | correct | maybe | existential | e instead of pi | accuracy | lower bound (95 %) | mean cost (USD) | mean latency (ms) |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  );
  for (const r of rows)
    out.push(
      `| ${r.service} | ${r.model} | ${r.band} | ${r.answers} | ${r.correct} | ${r.maybe} | ${r.existential} | ${r.eInsteadOfPi} | ${r.accuracy.toFixed(3)} | ${r.accuracyLowerBound.toFixed(3)} | ${r.meanCostUsd.toFixed(6)} | ${r.meanLatencyMs.toFixed(1)} |`,
    );

  out.push(
    '',
    '| service | band | minAccuracy | answered by | its lower bound | its mean cost (USD) | default model’s mean cost (USD) | cost vs default |',
    '| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |',
  );
  const defaults: Record<string, string> = { 'null-check': 'null-x-4o', 'pi-digits': 'pi-x-4o' };
  for (const service of ['null-check', 'pi-digits'])
    for (const band of BANDS)
      for (const minAccuracy of [0.99, 0.9, 0.5]) {
        const t = TEMPERATURES[band][0];
        const field =
          service === 'null-check'
            ? `isNull(value: 1, minAccuracy: ${minAccuracy}, temperature: ${t}) { ... on NullCheck { modelName } }`
            : `pi(digits: 5, minAccuracy: ${minAccuracy}, temperature: ${t}) { ... on ConstantDigits { modelName } }`;
        const answer = await post(`{ f: ${field} }`);
        const routed = answer.extensions?.cost?.routing?.[0];
        const model = routed?.model ?? answer.data?.f?.modelName ?? '?';
        const row = rows.find((r) => r.service === service && r.band === band && r.model === model);
        const base = rows.find(
          (r) => r.service === service && r.band === band && r.model === defaults[service],
        );
        const ratio =
          row !== undefined && base !== undefined ? row.meanCostUsd / base.meanCostUsd : undefined;
        out.push(
          `| ${service} | ${band} | ${minAccuracy} | ${model} | ${routed?.accuracyLowerBound?.toFixed(3) ?? '-'} | ${row?.meanCostUsd.toFixed(6) ?? '-'} | ${base?.meanCostUsd.toFixed(6) ?? '-'} | ${ratio === undefined ? '-' : `${(ratio * 100).toFixed(0)} %`} |`,
        );
      }
  process.stdout.write(`${out.join('\n')}\n`);
  await app.close();
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
