// Settings: what VS Code holds under `fimlsp.*` and what the server is sent.
//
// Nothing here imports `vscode`, so that the unit tests run under plain Node.

/** The configuration section, in VS Code and on the wire. */
export const SECTION = 'fimlsp';

/** Values of the `mode` setting. */
export const MODES = ['constrained', 'unconstrained', 'checked', 'heuristic'] as const;
/** Values of the `lineMode` setting. */
export const LINE_MODES = ['auto', 'single', 'multi'] as const;
/** Values of the `serverApi` setting. */
export const SERVER_APIS = ['auto', 'llama.cpp', 'openai'] as const;
/** Target Python grammars; `auto`: the project's (requires-python and so on). */
export const PYTHON_VERSIONS = [
  'auto',
  '3.8',
  '3.9',
  '3.10',
  '3.11',
  '3.12',
  '3.13',
  '3.14',
  '3.15',
] as const;

/**
 * The server's settings, keyed as the server reads them (camelCase).
 * `null` means "the server's default" (for the optional ones).
 */
export interface ServerSettings {
  enable: boolean;
  model: string;
  modelRepo: string | null;
  modelFile: string | null;
  gpuLayers: number | null;
  contextSize: number;
  threads: number;
  maxTokens: number;
  deadlineMs: number;
  topK: number;
  mode: (typeof MODES)[number];
  lineMode: (typeof LINE_MODES)[number];
  pythonVersion: (typeof PYTHON_VERSIONS)[number];
  maxDocumentChars: number;
  stayInside: boolean;
  witnessEnding: boolean;
  knownNames: boolean;
  projectContext: boolean;
  projectContextShare: number;
  apiKey: string | null;
  serverApi: (typeof SERVER_APIS)[number];
  modelVocab: string | null;
}

/** The server's own defaults (they match package.json's `contributes.configuration`). */
export const DEFAULTS: Readonly<ServerSettings> = Object.freeze({
  enable: true,
  model: 'default',
  modelRepo: null,
  modelFile: null,
  gpuLayers: null,
  contextSize: 4096,
  threads: 0,
  maxTokens: 64,
  deadlineMs: 3000,
  topK: 50,
  mode: 'constrained',
  lineMode: 'auto',
  pythonVersion: 'auto',
  maxDocumentChars: 2_000_000,
  stayInside: true,
  witnessEnding: false,
  knownNames: true,
  projectContext: true,
  projectContextShare: 0.3,
  apiKey: null,
  serverApi: 'auto',
  modelVocab: null,
});

/** Bounds the server accepts; a value outside is rejected by the server, so clamp it here. */
const INT_LIMITS: Record<string, [number, number]> = {
  gpuLayers: [0, 100_000],
  contextSize: [256, 1 << 20],
  threads: [0, 512],
  maxTokens: [1, 4096],
  deadlineMs: [50, 600_000],
  topK: [1, 1 << 20],
  maxDocumentChars: [1, 2 ** 31],
};

/** How the server is started. */
export interface ServerCommand {
  command: string;
  args: string[];
}

export const DEFAULT_COMMAND: Readonly<ServerCommand> = Object.freeze({
  command: 'fimlsp',
  args: ['--stdio'],
});

/**
 * The part of `vscode.WorkspaceConfiguration` used here: a getter of keys relative to
 * the `fimlsp` section (`get('maxTokens')`, `get('server.command')`).
 */
export interface ConfigReader {
  get<T>(key: string): T | undefined;
}

/** A plain object as a ConfigReader (for tests and for settings.json-like input). */
export function readerFromObject(values: Record<string, unknown>): ConfigReader {
  return {
    get<T>(key: string): T | undefined {
      return values[key] as T | undefined;
    },
  };
}

function boolean(value: unknown, fallback: boolean): boolean {
  return typeof value === 'boolean' ? value : fallback;
}

function share(value: unknown, fallback: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return fallback;
  }
  return Math.min(1, Math.max(0, value));
}

function optionalString(value: unknown): string | null {
  if (typeof value !== 'string') {
    return null;
  }
  const trimmed = value.trim();
  return trimmed === '' ? null : trimmed;
}

function integer(key: string, value: unknown, fallback: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return fallback;
  }
  const [low, high] = INT_LIMITS[key] ?? [-Infinity, Infinity];
  return Math.min(high, Math.max(low, Math.round(value)));
}

function choice<T extends string>(value: unknown, choices: readonly T[], fallback: T): T {
  const text = typeof value === 'number' ? String(value) : value;
  return typeof text === 'string' && (choices as readonly string[]).includes(text)
    ? (text as T)
    : fallback;
}

/**
 * The settings sent to the server, both as `initializationOptions` and as the answer to
 * `workspace/configuration` for section `fimlsp`.
 *
 * Every key is present, so that a value cleared in VS Code also clears what an earlier
 * layer (the initialization options) said. Bad values fall back to the default rather
 * than reaching the server, which would only log a warning; `gpuLayers` of -1 (or unset)
 * means "all layers when llama.cpp can offload" and is sent as null.
 */
export function serverSettings(config: ConfigReader): ServerSettings {
  const enable = config.get<unknown>('enable');
  const model = optionalString(config.get<unknown>('model'));
  const gpuLayers = config.get<unknown>('gpuLayers');
  return {
    enable: typeof enable === 'boolean' ? enable : DEFAULTS.enable,
    model: model ?? DEFAULTS.model,
    modelRepo: optionalString(config.get<unknown>('modelRepo')),
    modelFile: optionalString(config.get<unknown>('modelFile')),
    gpuLayers:
      typeof gpuLayers === 'number' && Number.isFinite(gpuLayers) && gpuLayers >= 0
        ? integer('gpuLayers', gpuLayers, 0)
        : null,
    contextSize: integer('contextSize', config.get('contextSize'), DEFAULTS.contextSize),
    threads: integer('threads', config.get('threads'), DEFAULTS.threads),
    maxTokens: integer('maxTokens', config.get('maxTokens'), DEFAULTS.maxTokens),
    deadlineMs: integer('deadlineMs', config.get('deadlineMs'), DEFAULTS.deadlineMs),
    topK: integer('topK', config.get('topK'), DEFAULTS.topK),
    mode: choice(config.get('mode'), MODES, DEFAULTS.mode),
    lineMode: choice(config.get('lineMode'), LINE_MODES, DEFAULTS.lineMode),
    pythonVersion: choice(config.get('pythonVersion'), PYTHON_VERSIONS, DEFAULTS.pythonVersion),
    maxDocumentChars: integer(
      'maxDocumentChars',
      config.get('maxDocumentChars'),
      DEFAULTS.maxDocumentChars,
    ),
    stayInside: boolean(config.get('stayInside'), DEFAULTS.stayInside),
    witnessEnding: boolean(config.get('witnessEnding'), DEFAULTS.witnessEnding),
    knownNames: boolean(config.get('knownNames'), DEFAULTS.knownNames),
    projectContext: boolean(config.get('projectContext'), DEFAULTS.projectContext),
    projectContextShare: share(config.get('projectContextShare'), DEFAULTS.projectContextShare),
    apiKey: optionalString(config.get<unknown>('apiKey')),
    serverApi: choice(config.get('serverApi'), SERVER_APIS, DEFAULTS.serverApi),
    modelVocab: optionalString(config.get<unknown>('modelVocab')),
  };
}

/** Variables that `server.command` and `server.args` may use. */
export interface CommandContext {
  /** The first workspace folder's path, if any. */
  workspaceFolder?: string;
  /** The user's home folder. */
  home?: string;
}

/** `${workspaceFolder}`, `${userHome}` and a leading `~/` replaced. */
export function expandVariables(text: string, context: CommandContext): string {
  let result = text.replace(/\$\{(workspaceFolder|userHome)\}/g, (match, name: string) => {
    const value = name === 'workspaceFolder' ? context.workspaceFolder : context.home;
    return value ?? match;
  });
  if (context.home && (result === '~' || result.startsWith('~/'))) {
    result = context.home + result.slice(1);
  }
  return result;
}

/** The command line that starts the server, from `server.command` and `server.args`. */
export function serverCommand(config: ConfigReader, context: CommandContext = {}): ServerCommand {
  const command = optionalString(config.get<unknown>('server.command')) ?? DEFAULT_COMMAND.command;
  const rawArgs = config.get<unknown>('server.args');
  const args = Array.isArray(rawArgs)
    ? rawArgs.filter((arg): arg is string => typeof arg === 'string')
    : [...DEFAULT_COMMAND.args];
  return {
    command: expandVariables(command, context),
    args: args.map((arg) => expandVariables(arg, context)),
  };
}

/** Setting keys (relative to `fimlsp`) whose change needs the server restarted. */
export const RESTART_KEYS = ['server.command', 'server.args'] as const;

/** One line for the log: the command as a shell would show it. */
export function describeCommand(command: ServerCommand): string {
  const quote = (part: string): string =>
    /^[\w@%+=:,./-]+$/.test(part) ? part : `'${part.replace(/'/g, `'\\''`)}'`;
  return [command.command, ...command.args].map(quote).join(' ');
}

/**
 * Where `command` would be found when started without a shell: itself when it names a
 * path (absolute, or relative to `cwd`), else the first match in `pathEnv` (PATH).
 * `isExecutable` checks a candidate; `extensions` are tried after the bare name (Windows'
 * PATHEXT). Undefined when nothing matches.
 */
export function findExecutable(
  command: string,
  pathEnv: string | undefined,
  isExecutable: (candidate: string) => boolean,
  options: { cwd?: string; delimiter?: string; separator?: string; extensions?: string[] } = {},
): string | undefined {
  const delimiter = options.delimiter ?? ':';
  const separator = options.separator ?? '/';
  const extensions = ['', ...(options.extensions ?? [])];
  const join = (dir: string, name: string): string =>
    dir.endsWith(separator) || dir.endsWith('/') ? dir + name : dir + separator + name;
  const tryAll = (base: string): string | undefined =>
    extensions.map((ext) => base + ext).find((candidate) => isExecutable(candidate));
  if (command === '') {
    return undefined;
  }
  if (command.includes('/') || command.includes(separator)) {
    const absolute = command.startsWith('/') || /^[A-Za-z]:[\\/]/.test(command);
    if (absolute || options.cwd === undefined) {
      return tryAll(command);
    }
    return tryAll(join(options.cwd, command));
  }
  for (const dir of (pathEnv ?? '').split(delimiter)) {
    if (dir === '') {
      continue;
    }
    const found = tryAll(join(dir, command));
    if (found !== undefined) {
      return found;
    }
  }
  return undefined;
}
