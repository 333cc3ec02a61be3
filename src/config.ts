/**
 * The configuration of `npm start`: the gateway's groups and the process-wide ones (all the gateway
 * reads, src/gateway/settings.ts), then the reference services' groups, which only the embedded
 * default reads (src/embedded-services.ts). API_KEYS is in both: the gateway's tiers and the services'
 * keys come from the one variable. `npm run services` reads only its own share (src/services/main.ts).
 */
import { gatewayAppSettings } from './gateway/settings.js';
import { servicesSettings } from './services/settings.js';
import { OTEL_VARIABLES } from './shared/otel-variables.js';
import {
  helpText as groupsHelpText,
  markdownTable as groupsMarkdownTable,
  loadSettings,
  type SettingsValues,
} from './shared/settings.js';

export { ConfigError } from './shared/settings.js';

/** Every settings group of `npm start`, in the order `--help` and the README list them. */
export const appSettings = {
  ...gatewayAppSettings,
  ...servicesSettings,
};

/** The validated configuration of `npm start`: one object per group. */
export type AppConfig = SettingsValues<typeof appSettings>;

/** Reads and validates every setting of `npm start`; throws a ConfigError naming each bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  return loadSettings(appSettings, env);
}

/**
 * The `--help` text of `npm start`: every setting, then the standard OpenTelemetry variables the
 * gateway honours (not settings of its own: the OpenTelemetry specification names and defines them).
 */
export function helpText(): string {
  const otel = [
    "OPENTELEMETRY (the specification's variables; an endpoint turns the export on; docs/operations.md, Tracing)",
    ...OTEL_VARIABLES.map((name) => `  ${name}`),
  ];
  // Node's own: the image sets it (the Dockerfile), so a platform that overrides it should know it is read.
  const node = [
    "NODE (node's own variable; the image sets V8's heap sizes in it: docs/operations.md, Memory)",
    '  NODE_OPTIONS',
  ];
  return `${settingsHelpText()}\n\n${otel.join('\n')}\n\n${node.join('\n')}`;
}

function settingsHelpText(): string {
  return groupsHelpText(appSettings, [
    'Usage: npm start [-- --help]',
    '',
    'GraphQL gateway in front of the null-check and pi-digits services. Without NULL_BASE_URL and',
    'PI_BASE_URL it also starts the reference implementations of both services in the same process.',
    '',
  ]);
}

/** The README configuration table. */
export function markdownTable(): string {
  return groupsMarkdownTable(appSettings);
}
