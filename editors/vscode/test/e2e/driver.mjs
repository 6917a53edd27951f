// The browser half of the end-to-end test (run.sh starts code-server and calls this).
//
// In VS Code (code-server) with the fimlsp extension installed and the tiny model:
//   1. open demo.py, wait for the status bar to say the model is ready,
//   2. type `total = sum(values` on an empty line (no auto-closing: the file does not parse),
//   3. wait for VS Code's ghost text, take a screenshot, accept it with Tab, save,
//   4. check with Python's ast.parse that the file parses and still holds what was typed,
//   5. the same in block.py (`y = [x,` inside a function), accepting the first word with
//      Ctrl+Right (accept next word) and the rest with Tab,
//   6. check that the status bar shows the last completion's figures,
//   7. click the status item twice: completions off, then on again (server states follow),
//   8. check the extension's output: the model loaded, no warnings about settings, no errors,
//   9. point fimlsp.server.command at a missing file: the server restarts and fails, the
//      status item turns red and a notification says what to do.
//
// Environment (set by run.sh): E2E_DEPS (node_modules with playwright-core), E2E_OUT,
// E2E_URL, E2E_WORKSPACE, FIMLSP_PYTHON, CHROMIUM.

import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set (run this through run.sh)`);
  }
  return value;
};

const require = createRequire(path.join(env('E2E_DEPS'), 'package.json'));
const { chromium } = require('playwright-core');

const OUT = env('E2E_OUT');
const WORKSPACE = env('E2E_WORKSPACE');
const PYTHON = env('FIMLSP_PYTHON');
const started = Date.now();
const report = { steps: [], ghostTexts: {} };

function log(message) {
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`[${seconds.padStart(5)} s] ${message}`);
  report.steps.push({ at: Number(seconds), message });
}

/** Whether Python's ast.parse accepts the file (the interpreter that runs the server). */
function parses(file) {
  try {
    execFileSync(PYTHON, ['-c', 'import ast, sys; ast.parse(open(sys.argv[1]).read())', file], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    return true;
  } catch {
    return false;
  }
}

/** Files named `name` under `dir`, recursively. */
function findFiles(dir, name) {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name === name) {
      found.push(path.join(entry.parentPath ?? entry.path, entry.name));
    }
  }
  return found;
}

async function waitFor(what, check, timeoutMs, intervalMs = 200) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
page.on('pageerror', (error) => log(`page error: ${error.message}`));

const statusItem = page.locator('.statusbar-item', { hasText: 'fimlsp' }).first();
const editor = page.locator('.editor-instance .monaco-editor').first();
const ghost = page.locator('.monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text');

async function statusBarText() {
  return ((await statusItem.textContent({ timeout: 1000 }).catch(() => '')) ?? '').trim();
}

async function screenshot(name) {
  const file = path.join(OUT, name);
  await page.screenshot({ path: file });
  log(`screenshot ${file}`);
  return file;
}

async function openFile(name) {
  await page.locator('.monaco-workbench').click({ position: { x: 600, y: 400 }, timeout: 5000 })
    .catch(() => undefined);
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: 30_000 });
  await input.fill(name);
  await page
    .locator('.quick-input-widget .monaco-list-row', { hasText: name })
    .first()
    .waitFor({ timeout: 30_000 });
  await page.keyboard.press('Enter');
  await page
    .locator('.tab.active', { hasText: name })
    .waitFor({ state: 'visible', timeout: 30_000 });
  await editor.waitFor({ state: 'visible', timeout: 30_000 });
  log(`opened ${name}`);
}

async function goToLine(line, column) {
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: 10_000 });
  // Go to Line opens quick access with a ':' prefix.
  await input.fill(`:${line}:${column}`);
  await page.keyboard.press('Enter');
  await input.waitFor({ state: 'hidden', timeout: 10_000 });
}

/** The ghost text shown now (inline part and preview lines), or '' when none. */
async function ghostText() {
  const count = await ghost.count();
  if (count === 0) {
    return '';
  }
  const parts = await ghost.allTextContents();
  return parts.join('');
}

/** Run a command by its title from the command palette. */
async function runCommand(title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: 10_000 });
  await input.fill(`>${title}`);
  await page
    .locator('.quick-input-widget .monaco-list-row', { hasText: title })
    .first()
    .waitFor({ timeout: 10_000 });
  await page.keyboard.press('Enter');
  await input.waitFor({ state: 'hidden', timeout: 10_000 });
}

/** Wait for ghost text; after a while ask for it explicitly (Trigger Inline Suggestion). */
async function waitForGhost(label) {
  let triggered = false;
  const firstWait = Date.now();
  return waitFor(
    `ghost text in ${label}`,
    async () => {
      const text = await ghostText();
      if (text) {
        return text;
      }
      if (!triggered && Date.now() - firstWait > 15_000) {
        triggered = true;
        log('no ghost text yet: running "Trigger Inline Suggestion"');
        await runCommand('Trigger Inline Suggestion');
      }
      return '';
    },
    60_000,
    100,
  );
}

async function save(file, before) {
  await page.keyboard.press('Control+S');
  return waitFor(
    `${path.basename(file)} to be saved`,
    () => {
      const text = fs.readFileSync(file, 'utf8');
      return text !== before ? text : '';
    },
    20_000,
  );
}

let failed = false;
try {
  log(`opening ${process.env.E2E_URL}`);
  await page.goto(env('E2E_URL'), { waitUntil: 'domcontentloaded', timeout: 120_000 });
  await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 120_000 });
  log('workbench loaded');

  // ---------------------------------------------------------------- 1. demo.py
  const demo = path.join(WORKSPACE, 'demo.py');
  const original = fs.readFileSync(demo, 'utf8');
  await openFile('demo.py');
  const ready = await waitFor(
    'the fimlsp status bar item to say "ready"',
    async () => {
      const text = await statusBarText();
      if (/error|stopped/.test(text)) {
        throw new Error(`the status bar says: ${text}`);
      }
      return /fimlsp: ready/.test(text) ? text : '';
    },
    180_000,
    250,
  );
  log(`status bar: ${ready}`);

  // ---------------------------------------------------------------- 2. type
  await editor.click();
  await goToLine(2, 1);
  const typed = 'total = sum(values';
  await page.keyboard.type(typed, { delay: 40 });
  log(`typed ${JSON.stringify(typed)}`);
  const unsaved = original.replace('\n\n', `\n${typed}\n`);
  const probe = path.join(OUT, 'typed-only.py');
  fs.writeFileSync(probe, unsaved);
  if (parses(probe)) {
    throw new Error('the typed text alone parses: the test would prove nothing');
  }

  // ---------------------------------------------------------------- 3. ghost text, Tab
  const shown = await waitForGhost('demo.py');
  report.ghostTexts['demo.py'] = shown;
  log(`ghost text: ${JSON.stringify(shown)}`);
  await screenshot('ghost-text.png');
  await page.keyboard.press('Tab');
  await waitFor('the ghost text to go', async () => (await ghostText()) === '', 10_000);
  const saved = await save(demo, original);
  log(`demo.py now: ${JSON.stringify(saved)}`);

  // ---------------------------------------------------------------- 4. it parses
  if (!saved.includes(typed)) {
    throw new Error(`the typed text is not in the saved file: ${JSON.stringify(saved)}`);
  }
  if (saved === unsaved) {
    throw new Error('Tab inserted nothing');
  }
  if (!parses(demo)) {
    throw new Error(`demo.py does not parse after accepting: ${JSON.stringify(saved)}`);
  }
  log('demo.py parses (ast.parse)');
  await screenshot('screenshot.png');

  // ---------------------------------------------------------------- 5. block.py
  const block = path.join(WORKSPACE, 'block.py');
  const blockOriginal = fs.readFileSync(block, 'utf8');
  await openFile('block.py');
  await editor.click();
  await goToLine(2, 9); // after "    pass"
  for (let i = 0; i < 4; i++) {
    await page.keyboard.press('Backspace');
  }
  const typed2 = 'y = [x,';
  await page.keyboard.type(typed2, { delay: 40 });
  log(`typed ${JSON.stringify(typed2)} in block.py`);
  const shown2 = await waitForGhost('block.py');
  report.ghostTexts['block.py'] = shown2;
  log(`ghost text: ${JSON.stringify(shown2)}`);
  await screenshot('ghost-text-block.png');
  // Accept the next word only (VS Code's Ctrl+Right), then what is left with Tab.
  await page.keyboard.press('Control+ArrowRight');
  await page.waitForTimeout(300);
  const rest = await ghostText();
  log(`after accept-next-word, ghost text: ${JSON.stringify(rest)}`);
  report.ghostTexts['block.py after accept next word'] = rest;
  if (rest.length >= shown2.length || !shown2.endsWith(rest)) {
    throw new Error(`accept next word did not accept a part of ${JSON.stringify(shown2)}`);
  }
  if (rest) {
    await page.keyboard.press('Tab');
    await waitFor('the ghost text to go', async () => (await ghostText()) === '', 10_000);
  }
  const saved2 = await save(block, blockOriginal);
  log(`block.py now: ${JSON.stringify(saved2)}`);
  if (!saved2.includes(`    ${typed2}`) || !parses(block)) {
    throw new Error(`block.py does not parse after accepting: ${JSON.stringify(saved2)}`);
  }
  log('block.py parses (ast.parse)');

  // ---------------------------------------------------------------- 6. status figures
  const figures = await waitFor(
    'completion figures in the status bar',
    async () => {
      const text = await statusBarText();
      return /\d+ tok/.test(text) ? text : '';
    },
    10_000,
  );
  report.statusBar = figures;
  log(`status bar: ${figures}`);
  await statusItem.hover();
  await page.waitForTimeout(1000);
  await screenshot('status-tooltip.png');

  // ---------------------------------------------------------------- 7. toggle
  // A click on the status item sets fimlsp.enable; the server is told (it asks for the
  // settings again) and answers with state "disabled", then "ready" when enabled again.
  await statusItem.click();
  const off = await waitFor(
    'the status bar to say "off"',
    async () => {
      const text = await statusBarText();
      return /fimlsp: off/.test(text) ? text : '';
    },
    20_000,
  );
  log(`after a click: ${off}`);
  await statusItem.click();
  const on = await waitFor(
    'the status bar to say "ready" again',
    async () => {
      const text = await statusBarText();
      return /fimlsp: ready/.test(text) ? text : '';
    },
    20_000,
  );
  log(`after another click: ${on}`);

  // ---------------------------------------------------------------- 8. the extension's log
  const logs = findFiles(path.join(OUT, 'code-server', 'user-data', 'logs'), 'fimlsp.log');
  const extensionLog = logs.map((file) => fs.readFileSync(file, 'utf8')).join('\n');
  if (!/model ready/.test(extensionLog)) {
    throw new Error(`the fimlsp output has no "model ready" line (files: ${logs.join(', ')})`);
  }
  for (const bad of ['unknown setting', '[error]']) {
    if (extensionLog.includes(bad)) {
      throw new Error(`the fimlsp output has "${bad}":\n${extensionLog}`);
    }
  }
  const serverStates = [...extensionLog.matchAll(/\[\w+\] (.*)$/gm)].map((m) => m[1]);
  report.extensionLog = serverStates;
  log('the fimlsp output has no warnings about settings and no errors');

  // ---------------------------------------------------------------- 9. a missing server
  // Changing fimlsp.server.command restarts the server; one that does not exist gives a
  // red status item and one message that says what to do.
  // Through the Settings editor, as a user would.
  await runCommand('Preferences: Open User Settings');
  await page.locator('.settings-editor').waitFor({ state: 'visible', timeout: 30_000 });
  await page.keyboard.type('fimlsp.server.command', { delay: 20 });
  // A machine-overridable setting: in code-server (a remote window) it is listed under
  // the "Remote" tab, the settings of the machine that runs the extension.
  await page.locator('.settings-editor .action-label', { hasText: 'Remote' }).first().click();
  const field = page
    .locator('.setting-item-contents', { hasText: 'Server: Command' })
    .locator('input')
    .first();
  await field.waitFor({ state: 'visible', timeout: 30_000 });
  await field.fill(path.join(OUT, 'no-such-fimlsp'));
  await field.press('Tab');
  log('set fimlsp.server.command to a missing file in the Settings editor');
  const broken = await waitFor(
    'the status bar to say "error"',
    async () => {
      const text = await statusBarText();
      return /fimlsp: error/.test(text) ? text : '';
    },
    30_000,
  );
  const notices = await waitFor(
    'a notification about the missing server',
    async () => {
      const texts = await page.locator('.notification-list-item').allTextContents();
      return texts.some((t) => t.includes('was not found')) ? texts : undefined;
    },
    10_000,
  );
  report.missingServer = { statusBar: broken, notifications: notices };
  log(`missing server: status bar "${broken}", ${notices.length} notification(s)`);
  await screenshot('missing-server.png');
} catch (error) {
  failed = true;
  log(`FAILED: ${error instanceof Error ? error.stack : String(error)}`);
  await screenshot('failure.png').catch(() => undefined);
} finally {
  report.seconds = (Date.now() - started) / 1000;
  report.passed = !failed;
  fs.writeFileSync(path.join(OUT, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  await browser.close();
}
process.exit(failed ? 1 : 0);
