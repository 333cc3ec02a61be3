/**
 * The setup the integration files in front of one scripted upstream share: the upstream started
 * before the file's tests and closed after them, and gateways in front of it, closed after the file
 * too. Registers vitest hooks: call it once, at the top level of a test file.
 */
import { afterAll, beforeAll } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway, type TestGatewayOptions } from './gateway.js';

/** API versions pinned to v1: the scripted routes are v1's, and no version discovery reaches them. */
const PINNED = { NULL_API_VERSION: 'v1', PI_API_VERSION: 'v1' };

export interface ScriptedGateways {
  /** The file's scripted upstream (there once the file's `beforeAll` has run). */
  readonly upstream: ScriptedUpstream;
  /** A gateway in front of the upstream with these settings (API versions pinned to v1 unless given). */
  gateway(
    env?: Record<string, string>,
    options?: Omit<TestGatewayOptions, 'env' | 'nullBaseUrl' | 'piBaseUrl'>,
  ): Promise<TestGateway>;
}

export function useScriptedGateways(): ScriptedGateways {
  let upstream: ScriptedUpstream | undefined;
  const gateways: TestGateway[] = [];
  beforeAll(async () => {
    upstream = await startScriptedUpstream();
  });
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.close()));
    await upstream?.close();
  });
  const scripted: ScriptedGateways = {
    get upstream() {
      if (upstream === undefined) throw new Error('the scripted upstream starts in the file’s beforeAll');
      return upstream;
    },
    async gateway(env = {}, options = {}) {
      const { url } = scripted.upstream;
      const started = await startTestGateway({
        ...options,
        nullBaseUrl: url,
        piBaseUrl: url,
        env: { ...PINNED, ...env },
      });
      gateways.push(started);
      return started;
    },
  };
  return scripted;
}
