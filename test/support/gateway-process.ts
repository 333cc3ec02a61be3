/**
 * The gateway as its own process, as `npm start` runs it (the CLI, through tsx): for tests that need
 * several replicas, or the process lifecycle itself. Logs are JSON lines, kept in memory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { LogLine } from './logs.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface GatewayProcess {
  readonly child: ChildProcess;
  /** `http://localhost:<port>/graphql`, from the process's own "listening" line. */
  readonly url: string;
  /** Every JSON log line so far. */
  readonly lines: LogLine[];
  /** SIGTERM, then waits for the exit (SIGKILL after `ms`). */
  stop(ms?: number): Promise<void>;
}

/** Starts `src/main.ts` on a free port (PORT=0) with `env`; resolves once it listens. */
export async function startGatewayProcess(
  env: Record<string, string>,
  startMs = 60_000,
): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'test', PORT: '0', HOST: '127.0.0.1', LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: LogLine[] = [];
  let buffered = '';
  let onListening: ((url: string) => void) | undefined;
  child.stdout?.setEncoding('utf8');
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
        if (typeof line.url === 'string' && /gateway listening/.test(line.msg)) onListening?.(line.url);
      } catch {
        // not a log line
      }
    }
  });
  child.stderr?.resume();
  const exited = once(child, 'exit');
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
    async stop(ms = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const kill = setTimeout(() => child.kill('SIGKILL'), ms);
      child.kill('SIGTERM');
      await exited;
      clearTimeout(kill);
    },
  };
}
