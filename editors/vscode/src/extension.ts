// The fimlsp extension: starts `fimlsp --stdio` for Python files, passes the `fimlsp.*`
// settings to it, and shows its state in the status bar. Ghost text comes from the
// server's `textDocument/inlineCompletion`, which vscode-languageclient (10 and newer)
// registers as an inline completion provider; accepting (Tab), accepting the next word
// or line and cycling are VS Code's own commands.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  type LanguageClientOptions,
  ResponseError,
  type ServerOptions,
  State,
} from 'vscode-languageclient/node';

import {
  type CommandContext,
  describeCommand,
  findExecutable,
  RESTART_KEYS,
  SECTION,
  serverCommand,
  serverSettings,
} from './config';
import {
  applyStatus,
  INITIAL_VIEW,
  isError,
  SERVER_STATUS_REQUEST,
  STATUS_NOTIFICATION,
  type StatusView,
  statusText,
  statusTooltip,
  withClientState,
} from './status';

const CLIENT_ID = 'fimlsp';
const CLIENT_NAME = 'fimlsp';

function configuration(scope?: vscode.ConfigurationScope): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(SECTION, scope);
}

function isExecutable(candidate: string): boolean {
  try {
    fs.accessSync(candidate, fs.constants.X_OK);
    return fs.statSync(candidate).isFile();
  } catch {
    return false;
  }
}

/** The server executable as it will be found, or undefined when it is not there. */
function locate(command: string, cwd: string | undefined): string | undefined {
  const windows = process.platform === 'win32';
  return findExecutable(command, process.env.PATH, isExecutable, {
    cwd,
    delimiter: path.delimiter,
    separator: path.sep,
    extensions: windows ? (process.env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [],
  });
}

function commandContext(): CommandContext {
  const folder = vscode.workspace.workspaceFolders?.[0];
  return {
    workspaceFolder: folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined,
    home: os.homedir(),
  };
}

/** The running extension: one language client at a time, the status bar and the log. */
class FimExtension implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private view: StatusView = { ...INITIAL_VIEW };
  private readonly statusItem: vscode.StatusBarItem;
  /** Starts and stops run one after the other. */
  private queue: Promise<void> = Promise.resolve();
  private disposed = false;

  constructor(readonly output: vscode.LogOutputChannel) {
    this.statusItem = vscode.window.createStatusBarItem(
      'fimlsp.status',
      vscode.StatusBarAlignment.Right,
      100,
    );
    this.statusItem.name = 'fimlsp';
    this.statusItem.command = 'fimlsp.toggle';
    this.render();
    this.statusItem.show();
  }

  // ------------------------------------------------------------------ status bar

  private setView(view: StatusView): void {
    this.view = view;
    this.render();
  }

  private render(): void {
    const enabled = configuration().get<boolean>('enable', true);
    let view = this.view;
    if (!enabled && view.state !== 'stopped' && view.state !== 'error') {
      view = { ...view, state: 'off' };
    }
    this.statusItem.text = statusText(view);
    this.statusItem.tooltip = statusTooltip(view, enabled);
    this.statusItem.backgroundColor = isError(view)
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : undefined;
  }

  // ------------------------------------------------------------------ client

  private clientOptions(): LanguageClientOptions {
    return {
      documentSelector: [{ language: 'python' }],
      outputChannel: this.output,
      initializationOptions: () => serverSettings(configuration()),
      middleware: {
        // The server also answers textDocument/completion (one item with the middle) for
        // editors without ghost text. In VS Code the inline item is the better UI, and a
        // completion request would cancel the inline one on the server (a newer request
        // for a document cancels the older), so none is sent.
        provideCompletionItem: () => undefined,
        // Turned off: no requests at all (the server would answer each with nothing).
        provideInlineCompletionItems: (document, position, context, token, next) =>
          configuration(document).get<boolean>('enable', true)
            ? next(document, position, context, token)
            : undefined,
        workspace: {
          // The server asks for section "fimlsp"; answer with its own keys only (VS Code
          // would also send `server` and `trace`, which the server does not know).
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (answers instanceof ResponseError) {
              return answers;
            }
            return params.items.map((item, index) => {
              if (item.section !== SECTION) {
                return answers[index];
              }
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
              return serverSettings(configuration(scope));
            });
          },
        },
      },
    };
  }

  /** Run `job` after the starts and stops queued before it. */
  private enqueue(job: () => Promise<void>): Promise<void> {
    const run = this.queue.then(job, job);
    this.queue = run.catch(() => undefined);
    return run;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  private async doStart(): Promise<void> {
    if (this.disposed || this.client !== undefined) {
      return;
    }
    const context = commandContext();
    const command = serverCommand(configuration(), context);
    if (locate(command.command, context.workspaceFolder) === undefined) {
      // Checked here so that the user gets one message that says what to do, rather
      // than the client library's report of a failed spawn.
      const reason = `${command.command} was not found`;
      this.output.error(`cannot start the server: ${reason} (PATH: ${process.env.PATH ?? ''})`);
      this.setView({ state: 'error', message: `cannot start the server: ${reason}` });
      void this.showStartError(command.command, reason);
      return;
    }
    const serverOptions: ServerOptions = {
      command: command.command,
      args: command.args,
      options: { cwd: context.workspaceFolder, env: process.env },
    };
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, this.clientOptions());
    this.client = client;
    client.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
      if (this.client === client) {
        this.setView(applyStatus(this.view, params));
      }
    });
    client.onDidChangeState((event) => {
      if (this.client !== client) {
        return;
      }
      if (event.newState === State.Starting) {
        this.setView(withClientState(this.view, 'starting', 'starting the server'));
      } else if (event.newState === State.Stopped) {
        this.setView(withClientState(this.view, 'stopped', 'the server is not running'));
      }
    });
    this.output.info(`starting ${describeCommand(command)}`);
    this.setView({ state: 'starting', message: `starting ${describeCommand(command)}` });
    try {
      await client.start();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.output.error(`cannot start the server: ${reason}`);
      this.setView({ state: 'error', message: `cannot start ${describeCommand(command)}` });
      this.client = undefined;
      void this.showStartError(command.command, reason);
      await client.dispose().catch(() => undefined);
      return;
    }
    // The notifications tell every later change; ask once for where things stand now.
    try {
      const status: unknown = await client.sendRequest(SERVER_STATUS_REQUEST, {});
      if (this.client === client && typeof status === 'object' && status !== null) {
        const { state, message } = status as { state?: unknown; message?: unknown };
        this.setView(applyStatus(this.view, { state, message }));
      }
    } catch (error) {
      this.output.warn(`${SERVER_STATUS_REQUEST} failed: ${String(error)}`);
    }
  }

  private async showStartError(command: string, reason: string): Promise<void> {
    const settings = 'Open Settings';
    const log = 'Show Log';
    const choice = await vscode.window.showErrorMessage(
      `fimlsp: cannot start the language server: ${reason}. Install it (pip install ` +
        `fimlsp) or set fimlsp.server.command (now ${JSON.stringify(command)}).`,
      settings,
      log,
    );
    if (choice === settings) {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'fimlsp.server');
    } else if (choice === log) {
      this.output.show(true);
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client === undefined) {
      return;
    }
    try {
      if (client.needsStop()) {
        await client.stop(5000);
      }
    } catch (error) {
      this.output.warn(`stopping the server: ${String(error)}`);
    } finally {
      await client.dispose().catch(() => undefined);
    }
    this.setView({ state: 'stopped', message: 'the server is not running' });
  }

  // ------------------------------------------------------------------ settings

  onConfigurationChanged(event: vscode.ConfigurationChangeEvent): void {
    if (!event.affectsConfiguration(SECTION)) {
      return;
    }
    if (RESTART_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
      this.output.info('server command changed: restarting');
      void this.restart();
      return;
    }
    this.render();
    const client = this.client;
    if (client?.isRunning()) {
      // "Settings changed": the server asks for section fimlsp again (the pull model).
      client
        .sendNotification(DidChangeConfigurationNotification.type, { settings: null })
        .catch((error: unknown) => this.output.warn(`didChangeConfiguration: ${String(error)}`));
    }
  }

  /** Set `fimlsp.enable` where it is defined now (folder, workspace, else the user's). */
  async setEnabled(enabled: boolean): Promise<void> {
    const config = configuration(vscode.window.activeTextEditor?.document);
    const inspected = config.inspect<boolean>('enable');
    let target = vscode.ConfigurationTarget.Global;
    if (inspected?.workspaceFolderValue !== undefined) {
      target = vscode.ConfigurationTarget.WorkspaceFolder;
    } else if (inspected?.workspaceValue !== undefined) {
      target = vscode.ConfigurationTarget.Workspace;
    }
    await config.update('enable', enabled, target);
    vscode.window.setStatusBarMessage(
      enabled ? 'fimlsp: completions on' : 'fimlsp: completions off',
      2000,
    );
  }

  async toggle(): Promise<void> {
    await this.setEnabled(!configuration().get<boolean>('enable', true));
  }

  async showServerStatus(): Promise<void> {
    const client = this.client;
    if (!client?.isRunning()) {
      this.output.warn('the server is not running');
    } else {
      const status: unknown = await client.sendRequest(SERVER_STATUS_REQUEST, {});
      this.output.info(`${SERVER_STATUS_REQUEST}: ${JSON.stringify(status)}`);
    }
    this.output.show(true);
  }

  /** The current view, for tests driving the extension through its API. */
  get status(): StatusView {
    return { ...this.view };
  }

  dispose(): void {
    this.disposed = true;
    this.statusItem.dispose();
  }

  async shutdown(): Promise<void> {
    await this.stop();
    this.dispose();
  }
}

let extension: FimExtension | undefined;

/** What `activate` returns (`vscode.extensions.getExtension('fimlsp.fimlsp').exports`). */
export interface FimlspApi {
  readonly status: StatusView;
  restart(): Promise<void>;
}

export function activate(context: vscode.ExtensionContext): FimlspApi {
  const output = vscode.window.createOutputChannel('fimlsp', { log: true });
  const ext = new FimExtension(output);
  extension = ext;
  context.subscriptions.push(
    output,
    ext,
    vscode.commands.registerCommand('fimlsp.enable', () => ext.setEnabled(true)),
    vscode.commands.registerCommand('fimlsp.disable', () => ext.setEnabled(false)),
    vscode.commands.registerCommand('fimlsp.toggle', () => ext.toggle()),
    vscode.commands.registerCommand('fimlsp.restart', () => ext.restart()),
    vscode.commands.registerCommand('fimlsp.showLog', () => output.show(true)),
    vscode.commands.registerCommand('fimlsp.showServerStatus', () => ext.showServerStatus()),
    vscode.workspace.onDidChangeConfiguration((event) => ext.onConfigurationChanged(event)),
  );
  void ext.start();
  return {
    get status(): StatusView {
      return ext.status;
    },
    restart: () => ext.restart(),
  };
}

export async function deactivate(): Promise<void> {
  const ext = extension;
  extension = undefined;
  await ext?.shutdown();
}
