/** Yoga's logger interface onto pino. Yoga logs masked (unexpected) errors through `error`. */
import type { YogaLogger } from 'graphql-yoga';
import type { Logger } from 'pino';

export function yogaLogger(logger: Logger): YogaLogger {
  const forward =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (...args: unknown[]) => {
      if (!logger.isLevelEnabled(level)) return;
      const [first, ...rest] = args;
      if (first instanceof Error) logger[level]({ err: first }, rest.map(String).join(' ') || first.message);
      else logger[level](args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' '));
    };
  return { debug: forward('debug'), info: forward('info'), warn: forward('warn'), error: forward('error') };
}
