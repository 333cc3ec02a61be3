/**
 * `npm run bench:compression`: what compressing an answer costs, per encoding at the levels the
 * gateway uses (src/gateway/delivery/compression.ts), on the answers that need it: `pi` with 100,000 and
 * 1,000,000 digits, as the gateway serialises them. CPU time of this process (user + system, the
 * thread pool included) per compressed megabyte of input, and the compressed sizes.
 */

import { createDigitEngine } from '../../src/digits/digit-engine.js';
import { createCompression, SUPPORTED_ENCODINGS } from '../../src/gateway/delivery/compression.js';

const compression = createCompression();
const engine = createDigitEngine({ useWorker: false });

const answerOf = (digits: string) =>
  JSON.stringify({
    data: {
      pi: {
        __typename: 'PiDigits',
        digits,
        precision: digits.length - 2,
        requestedDigits: digits.length - 2,
        correctDigits: digits.length - 2,
      },
    },
    extensions: { cost: { gpuCostUsd: 0.5, upstreamCalls: 1, cacheHits: 0 } },
  });

console.log(`node ${process.version}; CPU per MB = user + system time of this process per MiB of input`);
console.log('| answer | bytes | encoding | compressed bytes | ratio | CPU ms per MiB |');
console.log('|---|---|---|---|---|---|');
for (const decimals of [100_000, 1_000_000]) {
  const body = Buffer.from(answerOf(await engine.digits('pi', decimals)));
  for (const encoding of SUPPORTED_ENCODINGS) {
    const rounds = decimals === 1_000_000 ? 5 : 40;
    await compression.compress(body, encoding); // warm-up
    const before = process.cpuUsage();
    let size = 0;
    for (let i = 0; i < rounds; i++) size = (await compression.compress(body, encoding)).length;
    const used = process.cpuUsage(before);
    const mib = (body.length * rounds) / (1024 * 1024);
    const ms = (used.user + used.system) / 1000 / mib;
    console.log(
      `| pi ${decimals.toLocaleString('en')} digits | ${body.length} | ${encoding} | ${size} | ${(body.length / size).toFixed(2)} | ${ms.toFixed(1)} |`,
    );
  }
}
await engine.close?.();
