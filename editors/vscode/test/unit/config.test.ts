// Settings -> what the server receives; the server command; package.json's contributions.

import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import {
  DEFAULT_COMMAND,
  DEFAULTS,
  describeCommand,
  expandVariables,
  findExecutable,
  LINE_MODES,
  MODES,
  PYTHON_VERSIONS,
  readerFromObject,
  serverCommand,
  serverSettings,
} from '../../src/config';

const ROOT = path.join(__dirname, '..', '..', '..');

interface Property {
  type: string | string[];
  default: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
}

function packageJson(): {
  contributes: {
    configuration: { properties: Record<string, Property> };
    commands: { command: string; title: string }[];
  };
  main: string;
  engines: Record<string, string>;
  dependencies: Record<string, string>;
  activationEvents: string[];
} {
  return JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
}

/** The settings VS Code would give with nothing set: package.json's defaults. */
function packageDefaults(): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const [key, property] of Object.entries(packageJson().contributes.configuration.properties)) {
    values[key.replace(/^fimlsp\./, '')] = property.default;
  }
  return values;
}

describe('serverSettings', () => {
  test('with nothing set, the server defaults', () => {
    assert.deepEqual(serverSettings(readerFromObject({})), DEFAULTS);
  });

  test("package.json's defaults are the server's defaults", () => {
    assert.deepEqual(serverSettings(readerFromObject(packageDefaults())), DEFAULTS);
  });

  test('every server key is sent, camelCase, and nothing else', () => {
    const sent = serverSettings(readerFromObject({ 'server.command': 'x', 'trace.server': 'off' }));
    assert.deepEqual(Object.keys(sent).sort(), [
      'apiKey',
      'contextSize',
      'deadlineMs',
      'enable',
      'gpuLayers',
      'knownNames',
      'lineMode',
      'maxDocumentChars',
      'maxTokens',
      'mode',
      'model',
      'modelFile',
      'modelRepo',
      'modelVocab',
      'projectContext',
      'projectContextShare',
      'pythonVersion',
      'serverApi',
      'stayInside',
      'threads',
      'topK',
      'witnessEnding',
    ]);
  });

  test('values set by the user reach the server', () => {
    const settings = serverSettings(
      readerFromObject({
        enable: false,
        model: '/models/qwen.gguf',
        gpuLayers: 12,
        contextSize: 8192,
        threads: 4,
        maxTokens: 32,
        deadlineMs: 1500,
        topK: 20,
        mode: 'checked',
        lineMode: 'single',
        pythonVersion: '3.8',
        maxDocumentChars: 1000,
        stayInside: false,
        witnessEnding: true,
        knownNames: false,
        projectContext: false,
        projectContextShare: 0.5,
        apiKey: 'sekrit',
        serverApi: 'openai',
        modelVocab: '/models/qwen-vocab.gguf',
      }),
    );
    assert.deepEqual(settings, {
      enable: false,
      model: '/models/qwen.gguf',
      modelRepo: null,
      modelFile: null,
      gpuLayers: 12,
      contextSize: 8192,
      threads: 4,
      maxTokens: 32,
      deadlineMs: 1500,
      topK: 20,
      mode: 'checked',
      lineMode: 'single',
      pythonVersion: '3.8',
      maxDocumentChars: 1000,
      stayInside: false,
      witnessEnding: true,
      knownNames: false,
      projectContext: false,
      projectContextShare: 0.5,
      apiKey: 'sekrit',
      serverApi: 'openai',
      modelVocab: '/models/qwen-vocab.gguf',
    });
  });

  test('a setting that is not a boolean falls back to the default', () => {
    const settings = serverSettings(readerFromObject({ stayInside: 'no', witnessEnding: 1 }));
    assert.equal(settings.stayInside, true);
    assert.equal(settings.witnessEnding, false);
  });

  test('empty strings are "not set"', () => {
    const settings = serverSettings(
      readerFromObject({ model: '  ', modelRepo: '', modelFile: 'x.gguf' }),
    );
    assert.equal(settings.model, 'default');
    assert.equal(settings.modelRepo, null);
    assert.equal(settings.modelFile, 'x.gguf');
  });

  test('a Hugging Face repository and file', () => {
    const settings = serverSettings(
      readerFromObject({ modelRepo: ' Qwen/Qwen2.5-Coder-1.5B-GGUF ', modelFile: 'q8_0.gguf' }),
    );
    assert.equal(settings.modelRepo, 'Qwen/Qwen2.5-Coder-1.5B-GGUF');
    assert.equal(settings.modelFile, 'q8_0.gguf');
  });

  test('gpuLayers: -1 or unset is "all" (null), 0 is CPU only', () => {
    assert.equal(serverSettings(readerFromObject({ gpuLayers: -1 })).gpuLayers, null);
    assert.equal(serverSettings(readerFromObject({})).gpuLayers, null);
    assert.equal(serverSettings(readerFromObject({ gpuLayers: 0 })).gpuLayers, 0);
    assert.equal(serverSettings(readerFromObject({ gpuLayers: 99.6 })).gpuLayers, 100);
  });

  test('numbers are rounded and kept within what the server accepts', () => {
    const settings = serverSettings(
      readerFromObject({
        contextSize: 10,
        threads: -2,
        maxTokens: 100000,
        deadlineMs: 12.4,
        topK: -3,
        maxDocumentChars: 2 ** 40,
      }),
    );
    assert.equal(settings.contextSize, 256);
    assert.equal(settings.threads, 0);
    assert.equal(settings.maxTokens, 4096);
    assert.equal(settings.deadlineMs, 50);
    assert.equal(settings.topK, 1);
    assert.equal(settings.maxDocumentChars, 2 ** 31);
  });

  test('values of the wrong type fall back to the defaults', () => {
    const settings = serverSettings(
      readerFromObject({
        enable: 'yes',
        model: 42,
        maxTokens: '64',
        threads: Number.NaN,
        mode: 'fast',
        lineMode: null,
        pythonVersion: '2.7',
      }),
    );
    assert.deepEqual(settings, DEFAULTS);
  });

  test('pythonVersion written as a number', () => {
    assert.equal(serverSettings(readerFromObject({ pythonVersion: 3.9 })).pythonVersion, '3.9');
    // 3.10 as a JSON number is 3.1: not a version, so the default (the project's).
    assert.equal(serverSettings(readerFromObject({ pythonVersion: 3.1 })).pythonVersion, 'auto');
  });

  test('pythonVersion auto is passed on', () => {
    assert.equal(serverSettings(readerFromObject({ pythonVersion: 'auto' })).pythonVersion, 'auto');
    assert.equal(DEFAULTS.pythonVersion, 'auto');
  });
});

describe('serverCommand', () => {
  test('defaults to fimlsp --stdio', () => {
    assert.deepEqual(serverCommand(readerFromObject({})), DEFAULT_COMMAND);
    assert.deepEqual(serverCommand(readerFromObject(packageDefaults())), DEFAULT_COMMAND);
  });

  test('a python interpreter running the module', () => {
    const command = serverCommand(
      readerFromObject({
        'server.command': '/usr/bin/python3',
        'server.args': ['-m', 'lsp_server.cli', '--stdio'],
      }),
    );
    assert.deepEqual(command, {
      command: '/usr/bin/python3',
      args: ['-m', 'lsp_server.cli', '--stdio'],
    });
  });

  test('variables and ~ are expanded', () => {
    const context = { workspaceFolder: '/work/project', home: '/home/ada' };
    const command = serverCommand(
      readerFromObject({
        'server.command': '${workspaceFolder}/.venv/bin/fimlsp',
        'server.args': ['--stdio', '--log-file', '~/fimlsp.log', '${userHome}/x', 3],
      }),
      context,
    );
    assert.deepEqual(command, {
      command: '/work/project/.venv/bin/fimlsp',
      args: ['--stdio', '--log-file', '/home/ada/fimlsp.log', '/home/ada/x'],
    });
  });

  test('unknown variables and a missing folder are left as written', () => {
    assert.equal(expandVariables('${workspaceFolder}/x', {}), '${workspaceFolder}/x');
    assert.equal(expandVariables('${env:HOME}', { home: '/h' }), '${env:HOME}');
    assert.equal(expandVariables('a~/b', { home: '/h' }), 'a~/b');
    assert.equal(expandVariables('~', { home: '/h' }), '/h');
  });

  test('an empty args array is kept (no --stdio added)', () => {
    assert.deepEqual(serverCommand(readerFromObject({ 'server.args': [] })).args, []);
  });

  test('describeCommand quotes what a shell would need', () => {
    assert.equal(
      describeCommand({ command: '/opt/my env/python', args: ['-m', 'lsp_server.cli', "it's"] }),
      "'/opt/my env/python' -m lsp_server.cli 'it'\\''s'",
    );
  });
});

describe('package.json', () => {
  const pkg = packageJson();
  const properties = pkg.contributes.configuration.properties;

  test('enums are the values the server accepts', () => {
    assert.deepEqual(properties['fimlsp.mode']?.enum, [...MODES]);
    assert.deepEqual(properties['fimlsp.lineMode']?.enum, [...LINE_MODES]);
    assert.deepEqual(properties['fimlsp.pythonVersion']?.enum, [...PYTHON_VERSIONS]);
  });

  test('every server setting and the server command are contributed', () => {
    const keys = Object.keys(properties).map((key) => key.replace(/^fimlsp\./, ''));
    for (const key of Object.keys(DEFAULTS)) {
      assert.ok(keys.includes(key), `fimlsp.${key} missing`);
    }
    assert.ok(keys.includes('server.command'));
    assert.ok(keys.includes('server.args'));
  });

  test('every command has a title, and the status item command exists', () => {
    const commands = pkg.contributes.commands.map((c) => c.command);
    for (const name of [
      'fimlsp.enable',
      'fimlsp.disable',
      'fimlsp.toggle',
      'fimlsp.restart',
      'fimlsp.showLog',
    ]) {
      assert.ok(commands.includes(name), name);
    }
    for (const command of pkg.contributes.commands) {
      assert.ok(command.title.length > 0);
    }
  });

  test('the entry point is the compiled extension, started for Python files', () => {
    assert.equal(pkg.main, './out/src/extension.js');
    assert.ok(fs.existsSync(path.join(ROOT, pkg.main)), 'compile first');
    assert.ok(pkg.activationEvents.includes('onLanguage:python'));
  });

  test('vscode-languageclient 10 or newer (inline completion registered by default)', () => {
    const wanted = pkg.dependencies['vscode-languageclient'] ?? '';
    const major = Number(/\d+/.exec(wanted)?.[0]);
    assert.ok(major >= 10, wanted);
    const installed = JSON.parse(
      fs.readFileSync(
        path.join(ROOT, 'node_modules', 'vscode-languageclient', 'package.json'),
        'utf8',
      ),
    ) as { version: string; engines: { vscode: string } };
    assert.ok(Number(installed.version.split('.')[0]) >= 10, installed.version);
    // The extension may not claim an older VS Code than the client library needs.
    const version = (range: string | undefined): number[] =>
      (/(\d+)\.(\d+)\.(\d+)/.exec(range ?? '') ?? []).slice(1).map(Number);
    const ours = version(pkg.engines.vscode);
    const needed = version(installed.engines.vscode);
    assert.equal(ours.length, 3, pkg.engines.vscode);
    const cmp = ours.map((n, i) => n - (needed[i] ?? 0)).find((d) => d !== 0) ?? 0;
    assert.ok(cmp >= 0, `engines.vscode ${pkg.engines.vscode} < ${installed.engines.vscode}`);
  });
});

describe('findExecutable', () => {
  const files = new Set(['/usr/bin/python3', '/home/ada/.local/bin/fimlsp', '/w/.venv/bin/py']);
  const exists = (candidate: string): boolean => files.has(candidate);
  const PATH = '/usr/local/bin::/usr/bin:/home/ada/.local/bin/';

  test('a bare name is looked up in PATH, in order', () => {
    assert.equal(findExecutable('fimlsp', PATH, exists), '/home/ada/.local/bin/fimlsp');
    assert.equal(findExecutable('python3', PATH, exists), '/usr/bin/python3');
    assert.equal(findExecutable('fimlsp', '/usr/bin', exists), undefined);
    assert.equal(findExecutable('fimlsp', undefined, exists), undefined);
    assert.equal(findExecutable('', PATH, exists), undefined);
  });

  test('a path is taken as it is, relative ones from the workspace folder', () => {
    assert.equal(findExecutable('/usr/bin/python3', '', exists), '/usr/bin/python3');
    assert.equal(findExecutable('/usr/bin/python9', PATH, exists), undefined);
    assert.equal(findExecutable('.venv/bin/py', '', exists, { cwd: '/w' }), '/w/.venv/bin/py');
    assert.equal(findExecutable('.venv/bin/py', '', exists, { cwd: '/elsewhere' }), undefined);
  });

  test("Windows: PATHEXT extensions and ';' between PATH entries", () => {
    const win = new Set(['C:\\Python\\Scripts\\fimlsp.EXE']);
    const found = findExecutable('fimlsp', 'C:\\Windows;C:\\Python\\Scripts', (c) => win.has(c), {
      delimiter: ';',
      separator: '\\',
      extensions: ['.EXE', '.CMD'],
    });
    assert.equal(found, 'C:\\Python\\Scripts\\fimlsp.EXE');
  });
});
