// The status bar: `fimlsp/status` notifications -> view -> text and tooltip.

import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import {
  applyStatus,
  CLIENT_STATES,
  ENGINE_STATES,
  formatFigures,
  INITIAL_VIEW,
  isError,
  parseStatus,
  type StatusView,
  statusText,
  statusTooltip,
  STOP_REASONS,
  withClientState,
} from '../../src/status';

/** A completion's notification as the server sends it. */
const COMPLETION = {
  uri: 'file:///demo.py',
  state: 'ready',
  stopReason: 'connected',
  complete: true,
  lineMode: 'single',
  tokens: 12,
  quotientMs: 1.5,
  promptMs: 20.1,
  timeToFirstTokenMs: 84.6,
  tokensPerSecond: 47.94,
  parserUsPerToken: 310.25,
  elapsedMs: 300.2,
};

function ready(): StatusView {
  return applyStatus(INITIAL_VIEW, { state: 'ready', message: 'tiny.gguf (FIM, 4096 context)' });
}

describe('parseStatus', () => {
  test('keeps the known fields with the right types', () => {
    assert.deepEqual(parseStatus(COMPLETION), {
      uri: 'file:///demo.py',
      state: 'ready',
      stopReason: 'connected',
      complete: true,
      lineMode: 'single',
      tokens: 12,
      timeToFirstTokenMs: 84.6,
      tokensPerSecond: 47.94,
      parserUsPerToken: 310.25,
      elapsedMs: 300.2,
    });
  });

  test('drops wrong types and survives junk', () => {
    assert.deepEqual(parseStatus({ state: 3, tokens: 'many', complete: 'yes', message: 'm' }), {
      message: 'm',
    });
    assert.deepEqual(parseStatus({ tokens: Number.POSITIVE_INFINITY }), {});
    assert.deepEqual(parseStatus(null), {});
    assert.deepEqual(parseStatus([1, 2]), {});
    assert.deepEqual(parseStatus('ready'), {});
  });
});

describe('applyStatus', () => {
  test('the client starts in "starting"', () => {
    assert.equal(INITIAL_VIEW.state, 'starting');
    assert.equal(statusText(INITIAL_VIEW), '$(loading~spin) fimlsp: starting');
  });

  test('state changes carry a message', () => {
    const loading = applyStatus(INITIAL_VIEW, { state: 'loading', message: 'loading model x' });
    assert.deepEqual(loading, { state: 'loading', message: 'loading model x' });
    assert.equal(statusText(loading), '$(loading~spin) fimlsp: loading');
    const view = applyStatus(loading, { state: 'ready', message: 'x.gguf (FIM, 4096 context)' });
    assert.equal(view.state, 'ready');
    assert.equal(statusText(view), '$(sparkle) fimlsp: ready');
  });

  test('a completion becomes the last figures; its message is not the state message', () => {
    const view = applyStatus(ready(), { ...COMPLETION, message: 'about the stop' });
    assert.equal(view.message, 'tiny.gguf (FIM, 4096 context)');
    assert.equal(view.last?.tokens, 12);
    assert.equal(view.last?.message, 'about the stop');
    assert.equal(statusText(view), '$(sparkle) fimlsp 12 tok · 48 tok/s · 85 ms');
  });

  test('a cancelled request keeps the previous figures', () => {
    const view = applyStatus(ready(), COMPLETION);
    const after = applyStatus(view, {
      uri: 'file:///demo.py',
      state: 'ready',
      stopReason: 'cancelled',
    });
    assert.equal(after.last?.tokens, 12);
    assert.equal(statusText(after), statusText(view));
  });

  test('a new state forgets the last figures; the same state keeps them', () => {
    const view = applyStatus(ready(), COMPLETION);
    const same = applyStatus(view, { state: 'ready', message: 'tiny.gguf (FIM, 4096 context)' });
    assert.equal(same.last?.tokens, 12);
    const off = applyStatus(view, { state: 'disabled', message: 'off in the settings' });
    assert.equal(off.last, undefined);
    const again = applyStatus(off, { state: 'ready', message: 'completions are enabled again' });
    assert.equal(statusText(again), '$(sparkle) fimlsp: ready');
    assert.equal(again.message, 'completions are enabled again');
  });

  test('stop reasons that explain an empty answer', () => {
    const none = applyStatus(ready(), {
      state: 'ready',
      stopReason: 'no_middle_fits',
      message: 'no text at the cursor can connect to the code after it',
      quotientMs: 2,
    });
    assert.equal(statusText(none), '$(sparkle) fimlsp: nothing fits');
    assert.match(statusTooltip(none, true), /no text at the cursor can connect/);
    const newer = applyStatus(ready(), {
      state: 'ready',
      stopReason: 'no_middle_fits',
      message: 'line 2 uses syntax from Python 3.14, newer than the target Python 3.12',
      target: '3.12',
      targetOrigin: 'requires-python >=3.12 in /work/app/pyproject.toml',
    });
    const tooltip = statusTooltip(newer, true);
    assert.match(tooltip, /line 2 uses syntax from Python 3.14/);
    assert.match(tooltip, /target Python: 3.12/);
    assert.match(tooltip, /target from: requires-python >=3.12 in \/work\/app\/pyproject.toml/);
    const large = applyStatus(ready(), { state: 'ready', stopReason: 'too_large' });
    assert.equal(statusText(large), '$(sparkle) fimlsp: file too large');
  });

  test('an unfinished middle (nothing offered in constrained mode) says so', () => {
    const view = applyStatus(ready(), {
      ...COMPLETION,
      stopReason: 'max_tokens',
      complete: false,
      tokens: 24,
    });
    assert.equal(statusText(view), '$(sparkle) fimlsp: unfinished · 24 tok · 48 tok/s · 85 ms');
  });

  test('a reused middle (typed along) shows its time', () => {
    const view = applyStatus(ready(), {
      state: 'ready',
      stopReason: 'reused',
      tokens: 0,
      elapsedMs: 3.4,
    });
    assert.equal(statusText(view), '$(sparkle) fimlsp 0 tok · 3 ms');
  });

  test('errors and disabled', () => {
    const error = applyStatus(ready(), { state: 'error', message: 'model not found: /x.gguf' });
    assert.equal(statusText(error), '$(error) fimlsp: error');
    assert.ok(isError(error));
    assert.match(statusTooltip(error, true), /model not found: \/x\.gguf/);
    const disabled = applyStatus(ready(), {
      state: 'disabled',
      message: 'completions are disabled in the settings',
    });
    assert.equal(statusText(disabled), '$(circle-slash) fimlsp: off');
    assert.ok(!isError(disabled));
  });

  test("the client's own states", () => {
    const stopped = withClientState(ready(), 'stopped', 'the server is not running');
    assert.equal(statusText(stopped), '$(debug-stop) fimlsp: stopped');
    assert.ok(isError(stopped));
    assert.equal(withClientState(stopped, 'starting').message, 'the server is not running');
    assert.equal(statusText({ state: 'something new' }), '$(question) fimlsp: something new');
  });

  test('every state has an icon; names from the wire are only looked up', () => {
    for (const state of [...ENGINE_STATES, ...CLIENT_STATES]) {
      assert.ok(!statusText({ state }).includes('$(question)'), state);
    }
    assert.equal(statusText({ state: 'toString' }), '$(question) fimlsp: toString');
    for (const stopReason of [...STOP_REASONS, 'constructor']) {
      const view = applyStatus(ready(), { ...COMPLETION, stopReason });
      assert.match(statusText(view), /^\$\(sparkle\) fimlsp[: ]/, stopReason);
      assert.ok(!statusText(view).includes('undefined'), stopReason);
    }
  });
});

describe('formatFigures', () => {
  test('nothing known, nothing shown', () => {
    assert.equal(formatFigures({}), '');
  });

  test('no tokens/s when none were generated', () => {
    assert.equal(formatFigures({ tokens: 0, tokensPerSecond: 0, elapsedMs: 12.6 }), '0 tok · 13 ms');
  });
});

describe('statusTooltip', () => {
  test('lists every figure of the last completion and what a click does', () => {
    const view = applyStatus(ready(), COMPLETION);
    assert.equal(
      statusTooltip(view, true),
      [
        'fimlsp: ready',
        'tiny.gguf (FIM, 4096 context)',
        '',
        'Last completion:',
        '  stop reason: connected',
        '  tokens: 12',
        '  time to first token: 84.6 ms',
        '  tokens per second: 47.9',
        '  parser time per token: 310.3 µs',
        '  line mode: single',
        '  complete: yes',
        '  elapsed: 300.2 ms',
        '',
        'Click to disable completions',
      ].join('\n'),
    );
  });

  test('says a click enables when disabled', () => {
    assert.match(statusTooltip({ state: 'off' }, false), /Click to enable completions$/);
  });
});
