// The status bar: what it shows for the server's state and its last `fimlsp/status`.
//
// Nothing here imports `vscode`, so that the unit tests run under plain Node.

/** The notification the server sends after each completion and on each state change. */
export const STATUS_NOTIFICATION = 'fimlsp/status';
/** The request that returns what the server holds (`state` among it). */
export const SERVER_STATUS_REQUEST = 'fimlsp/serverStatus';

/** The server's model states: `lsp_server.status.EngineState`, in the same order. */
export const ENGINE_STATES = [
  'idle',
  'loading',
  'ready',
  'error',
  'disabled',
  'unavailable',
] as const;
export type EngineState = (typeof ENGINE_STATES)[number];

/** States of the extension's own: the process starting, not running, or turned off. */
export const CLIENT_STATES = ['starting', 'stopped', 'off'] as const;
export type ClientState = (typeof CLIENT_STATES)[number];

/** Why a completion request ended: `lsp_server.status.StopReason`, in the same order. */
export const STOP_REASONS = [
  'eos',
  'connected',
  'steered',
  'repeats_right',
  'likeliest_end',
  'unsure_line',
  'witness',
  'max_tokens',
  'no_viable_token',
  'deadline',
  'cancelled',
  'checked_prefix',
  'heuristic_cut',
  'reused',
  'no_middle_fits',
  'too_large',
  'no_model',
  'disabled',
] as const;
export type StopReason = (typeof STOP_REASONS)[number];

/** Parameters of `fimlsp/status`; every field may be missing. */
export interface StatusParams {
  uri?: string;
  state?: string;
  stopReason?: string;
  tokens?: number;
  timeToFirstTokenMs?: number;
  tokensPerSecond?: number;
  parserUsPerToken?: number;
  lineMode?: string;
  complete?: boolean;
  elapsedMs?: number;
  message?: string;
  /** The target Python ("3.12") and where it came from (a file or the setting). */
  target?: string;
  targetOrigin?: string;
}

/**
 * What the status bar shows. `state` is the server's (`ENGINE_STATES`) or the client's
 * own (`CLIENT_STATES`): "starting" while the process starts, "stopped" when it is not
 * running, "off" when `fimlsp.enable` is false.
 */
export interface StatusView {
  state: string;
  /** The latest state message (model name, error text). */
  message?: string;
  /** The latest completion's figures (a `fimlsp/status` with a stop reason). */
  last?: StatusParams;
}

export const INITIAL_VIEW: Readonly<StatusView> = Object.freeze({ state: 'starting' });

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The known fields of a `fimlsp/status` payload with the right types; others dropped. */
export function parseStatus(raw: unknown): StatusParams {
  if (!isObject(raw)) {
    return {};
  }
  const out: StatusParams = {};
  for (const key of [
    'uri',
    'state',
    'stopReason',
    'lineMode',
    'message',
    'target',
    'targetOrigin',
  ] as const) {
    const value = raw[key];
    if (typeof value === 'string') {
      out[key] = value;
    }
  }
  for (const key of [
    'tokens',
    'timeToFirstTokenMs',
    'tokensPerSecond',
    'parserUsPerToken',
    'elapsedMs',
  ] as const) {
    const value = raw[key];
    if (typeof value === 'number' && Number.isFinite(value)) {
      out[key] = value;
    }
  }
  if (typeof raw.complete === 'boolean') {
    out.complete = raw.complete;
  }
  return out;
}

/**
 * The view after a `fimlsp/status` notification. A notification with a stop reason is a
 * completion's report and becomes `last`; one without only moves the state (and a move
 * to another state forgets the last figures).
 */
export function applyStatus(view: StatusView, raw: unknown): StatusView {
  const status = parseStatus(raw);
  const next: StatusView = { ...view };
  if (status.state !== undefined && status.state !== view.state) {
    next.state = status.state;
    if (status.stopReason === undefined) {
      // A new state (a model load, disabled, enabled again): older figures are stale.
      delete next.last;
    }
  }
  if (status.stopReason !== undefined) {
    // A completion's report; its message explains the stop reason, not the state. While
    // the user types most requests are cancelled by the next one: keep the last figures.
    if (status.stopReason !== 'cancelled') {
      next.last = status;
    }
  } else if (status.message !== undefined) {
    next.message = status.message;
  }
  return next;
}

/** The view when the client itself changes state. */
export function withClientState(view: StatusView, state: string, message?: string): StatusView {
  return { ...view, state, message: message ?? view.message };
}

function round(value: number, digits = 0): string {
  const factor = 10 ** digits;
  return String(Math.round(value * factor) / factor);
}

/** "12 tok · 48 tok/s · 85 ms": the figures of a completion, short. */
export function formatFigures(status: StatusParams): string {
  const parts: string[] = [];
  if (status.tokens !== undefined) {
    parts.push(`${status.tokens} tok`);
  }
  if (status.tokensPerSecond !== undefined && status.tokensPerSecond > 0) {
    parts.push(`${round(status.tokensPerSecond)} tok/s`);
  }
  if (status.timeToFirstTokenMs !== undefined && (status.tokens ?? 0) > 0) {
    parts.push(`${round(status.timeToFirstTokenMs)} ms`);
  } else if (status.elapsedMs !== undefined) {
    parts.push(`${round(status.elapsedMs)} ms`);
  }
  return parts.join(' · ');
}

const ICONS: Record<EngineState | ClientState, string> = {
  starting: '$(loading~spin)',
  loading: '$(loading~spin)',
  ready: '$(sparkle)',
  idle: '$(sparkle)',
  error: '$(error)',
  disabled: '$(circle-slash)',
  unavailable: '$(debug-disconnect)',
  off: '$(circle-slash)',
  stopped: '$(debug-stop)',
};

/** Stop reasons that say why nothing was offered; shown instead of figures. */
const QUIET_REASONS: Partial<Record<StopReason, string>> = {
  no_middle_fits: 'nothing fits',
  too_large: 'file too large',
  no_model: 'no model',
  disabled: 'off',
};

/** `table[key]` for a key that came over the wire (any string; nothing inherited). */
function lookup<T>(table: Partial<Record<string, T>>, key: string): T | undefined {
  return Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined;
}

/** The status bar text: an icon, "fimlsp" and what matters most now. */
export function statusText(view: StatusView): string {
  const icon = lookup(ICONS, view.state) ?? '$(question)';
  if (view.state === 'ready' || view.state === 'idle') {
    const last = view.last;
    const reason = last?.stopReason;
    const quiet = reason === undefined ? undefined : lookup(QUIET_REASONS, reason);
    if (quiet !== undefined) {
      return `${icon} fimlsp: ${quiet}`;
    }
    const figures = last === undefined ? '' : formatFigures(last);
    if (figures && last?.complete === false) {
      // The middle did not connect to the code after the cursor within the budget.
      return `${icon} fimlsp: unfinished · ${figures}`;
    }
    return figures ? `${icon} fimlsp ${figures}` : `${icon} fimlsp: ${view.state}`;
  }
  if (view.state === 'disabled' || view.state === 'off') {
    return `${icon} fimlsp: off`;
  }
  return `${icon} fimlsp: ${view.state}`;
}

const LABELS: [keyof StatusParams, string, (v: never) => string][] = [
  ['stopReason', 'stop reason', (v: string) => v],
  ['tokens', 'tokens', (v: number) => String(v)],
  ['timeToFirstTokenMs', 'time to first token', (v: number) => `${round(v, 1)} ms`],
  ['tokensPerSecond', 'tokens per second', (v: number) => round(v, 1)],
  ['parserUsPerToken', 'parser time per token', (v: number) => `${round(v, 1)} µs`],
  ['lineMode', 'line mode', (v: string) => v],
  ['complete', 'complete', (v: boolean) => (v ? 'yes' : 'no')],
  ['elapsedMs', 'elapsed', (v: number) => `${round(v, 1)} ms`],
  ['message', 'message', (v: string) => v],
  ['target', 'target Python', (v: string) => v],
  ['targetOrigin', 'target from', (v: string) => v],
];

/** The tooltip: the state, its message, every figure of the last completion, the click. */
export function statusTooltip(view: StatusView, enabled: boolean): string {
  const lines = [`fimlsp: ${view.state}`];
  if (view.message) {
    lines.push(view.message);
  }
  const last = view.last;
  if (last !== undefined) {
    lines.push('', 'Last completion:');
    for (const [key, label, format] of LABELS) {
      const value = last[key];
      if (value !== undefined) {
        lines.push(`  ${label}: ${(format as (v: unknown) => string)(value)}`);
      }
    }
  }
  lines.push('', enabled ? 'Click to disable completions' : 'Click to enable completions');
  return lines.join('\n');
}

/** Whether the state is a problem the status bar should colour. */
export function isError(view: StatusView): boolean {
  return view.state === 'error' || view.state === 'stopped' || view.state === 'unavailable';
}
