/**
 * The project's CLIs as processes of their own, as `npm start` and `npm run services` run them
 * (through tsx): for tests that need several replicas, or the process lifecycle itself.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { LogLine } from './logs.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The settings of a gateway CLI as in production, on a free loopback port, logging JSON lines at
 * info, with the embedded reference services (no upstream URLs) and no rate limit on the free tier.
 */
export const PRODUCTION_CLI_ENV: Readonly<Record<string, string>> = Object.freeze({
  NODE_ENV: 'production',
  LOG_FORMAT: 'json',
  LOG_LEVEL: 'info',
  HOST: '127.0.0.1',
  PORT: '0',
  NULL_BASE_URL: '',
  PI_BASE_URL: '',
  FREE_RATE_LIMIT: '0',
});

export interface CliExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface CliProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<CliExit>;
  /** Everything it wrote so far, standard output and error together (as UTF-8 text). */
  output(): string;
}

/**
 * Starts `node --import tsx <entry>` in the project's root with `env` over this process's
 * environment, its standard output and error piped and kept; `detached`: in a process group of its
 * own. Listeners added to `child.stdout` later see `output()` with their chunk already in it.
 */
export function spawnCli(
  entry: string,
  env: Record<string, string> = {},
  options: { detached?: boolean } = {},
): CliProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    detached: options.detached ?? false,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  let output = '';
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      output += chunk;
    });
  }
  return { child, exited, output: () => output };
}

/** SIGKILL, by pid, to those of `children` still running (normally none), and forgets them all. */
export function killLeftovers(children: ChildProcess[]): void {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

export interface GatewayProcess {
  readonly child: ChildProcess;
  /** `http://localhost:<port>/graphql`, from the process's own "listening" line. */
  readonly url: string;
  /** Every JSON log line so far. */
  readonly lines: LogLine[];
  /** The same lines as the process wrote them. */
  readonly raw: string[];
  /** SIGTERM, then waits for the exit (SIGKILL after `ms`). */
  stop(ms?: number): Promise<void>;
}

/**
 * Starts `src/main.ts` on a free port (PORT=0) with `env`; resolves once it listens. `detached`: in a
 * process group of its own (its pid is the group's: `process.kill(-pid, 'SIGKILL')` kills it all, as
 * Kubernetes or the OOM killer would).
 */
export async function startGatewayProcess(
  env: Record<string, string>,
  startMs = 60_000,
  options: { detached?: boolean } = {},
): Promise<GatewayProcess> {
  const { child, exited } = spawnCli(
    'src/main.ts',
    {
      NODE_ENV: 'test',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_FORMAT: 'json',
      ...env,
    },
    { detached: options.detached },
  );
  const lines: LogLine[] = [];
  const raw: string[] = [];
  let buffered = '';
  let onListening: ((url: string) => void) | undefined;
  child.stdout?.on('data', (chunk: string) => {
    buffered += chunk;
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const text = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      newline = buffered.indexOf('\n');
      try {
        const line = JSON.parse(text) as LogLine;
        lines.push(line);
        raw.push(text);
        if (typeof line.url === 'string' && /gateway listening/.test(line.msg)) onListening?.(line.url);
      } catch {
        // not a log line
      }
    }
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('gateway process did not start in time')), startMs);
    onListening = (found) => {
      clearTimeout(timer);
      resolve(found.replace('localhost', '127.0.0.1'));
    };
    exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`gateway process exited early: ${JSON.stringify(lines.slice(-3))}`));
    });
  });
  return {
    child,
    url,
    lines,
    raw,
    async stop(ms = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const kill = setTimeout(() => child.kill('SIGKILL'), ms);
      child.kill('SIGTERM');
      await exited;
      clearTimeout(kill);
    },
  };
}
