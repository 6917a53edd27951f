"""Emacs with Eglot, configured by ``editors/other/emacs/fimlsp.el``, against the real server.

``emacs --batch`` loads the configuration file as a user would, opens Python files, lets
Eglot start ``fimlsp --stdio`` (with a tiny test model), asks for completions with
``completion-at-point`` and saves the buffers; the test then checks that the server's
item was applied exactly and that the files parse.

Needs ``emacs`` with Eglot: Emacs 29 or later, or Debian 12's
``apt-get install emacs-nox elpa-eglot``; skipped otherwise.
"""

# Fixtures imported from model_fixtures/lsp_fixtures are requested by parameter name, which
# ruff reads as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from lsp_fixtures import stopping_model  # noqa: F401  (fixtures are used by name)
from model_fixtures import model_cache, tiny_factory  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "editors" / "other" / "emacs" / "fimlsp.el"

#: Each case: file name, text, cursor (0-based line, column).  The first completes after an
#: operator (nothing to replace); the second after a word, which fimlsp's item replaces
#: with itself plus the middle.
CASES = [
    ("gap.py", "def f(x):\n    return (x +\n", (1, 15)),
    ("word.py", "def f(x):\n    y = [x\n", (1, 10)),
]

DRIVER = r"""
;;; driver.el --- the test's part: what a user would type  -*- lexical-binding: t; -*-
(require 'json)
(setq fimlsp-initialization-options
      ;; knownNames off: the random-weight test model writes arbitrary names
      `(:model ,(getenv "FIMLSP_TEST_MODEL") :maxTokens 48 :deadlineMs 4000
        :knownNames :json-false))
;; Eglot's own per-project settings reach the server too (workspace/configuration, section
;; "fimlsp") and win over the initializationOptions.
(setq-default eglot-workspace-configuration '(:fimlsp (:deadlineMs 8000)))
(setq eglot-sync-connect t eglot-connect-timeout 60)

(defun fimlsp-test-fail (fmt &rest args)
  (princ (concat "FIMLSP-FAIL " (apply #'format fmt args) "\n"))
  (kill-emacs 1))

(defvar fimlsp-test-items nil "The items of the last textDocument/completion answer.")
(advice-add 'jsonrpc-request :around
            (lambda (orig conn method params &rest args)
              (let ((result (apply orig conn method params args)))
                (when (eq method :textDocument/completion)
                  (setq fimlsp-test-items
                        (if (vectorp result) result (plist-get result :items))))
                result)))

(defun fimlsp-test-open (file)
  (find-file file)
  ;; What the command loop does after a command: runs Eglot's deferred eglot-ensure.
  (run-hooks 'post-command-hook)
  (or (eglot-current-server) (fimlsp-test-fail "no Eglot server for %s" file)))

(defun fimlsp-test-wait-ready (server)
  (let ((deadline (+ (float-time) 60)) status)
    (while (progn (setq status (jsonrpc-request server :fimlsp/serverStatus nil))
                  (not (member (plist-get status :state) '("ready" "error" "disabled"))))
      (when (> (float-time) deadline) (fimlsp-test-fail "model not ready: %S" status))
      (sleep-for 0.1))
    status))

(defun fimlsp-test-complete (file line column)
  (let ((server (fimlsp-test-open file)))
    (goto-char (point-min))
    (forward-line line)
    (forward-char column)
    (setq fimlsp-test-items nil)
    (let* ((before (buffer-string))
           (capf (completion-at-point)))
      (save-buffer)
      (list :file file :capf (and capf t) :before before :after (buffer-string)
            :items fimlsp-test-items
            :server (plist-get (jsonrpc-request
                                server :fimlsp/serverStatus
                                (list :uri (eglot--path-to-uri buffer-file-name)))
                               :document)))))

(let* ((files (split-string (getenv "FIMLSP_TEST_FILES") "\n"))
       (cursors (split-string (getenv "FIMLSP_TEST_CURSORS") "\n"))
       (server (fimlsp-test-open (car files)))
       (status (fimlsp-test-wait-ready server))
       (cases (cl-loop for file in files
                       for cursor in cursors
                       for (line column) = (mapcar #'string-to-number (split-string cursor))
                       collect (fimlsp-test-complete file line column))))
  (princ (format "FIMLSP-RESULT %s\n"
                 (json-encode
                  (list :command (process-command (jsonrpc--process server))
                        :status status
                        :servers (cl-loop for servers being the hash-values
                                          of eglot--servers-by-project
                                          sum (length servers))
                        :cases (vconcat cases)))))
  (eglot-shutdown server))
"""


@cache
def emacs_with_eglot() -> str | None:
    """Why Emacs with Eglot cannot run here, or None when it can."""
    if shutil.which("emacs") is None:
        return "emacs is not installed (apt-get install emacs-nox elpa-eglot)"
    probe = subprocess.run(
        ["emacs", "--batch", "--eval", "(require 'eglot)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        return f"Emacs has no Eglot (apt-get install elpa-eglot): {probe.stderr.strip()[-300:]}"
    return None


# A string condition is evaluated before the test's fixtures build a model.
needs_emacs = pytest.mark.skipif(
    "emacs_with_eglot() is not None",
    reason="needs Emacs with Eglot: Emacs 29+, or Debian 12's emacs-nox and elpa-eglot",
)


def fimlsp_dir() -> Path:
    """The folder of this environment's ``fimlsp`` command, to put first on PATH."""
    here = Path(sys.executable).parent
    if (here / "fimlsp").is_file():
        return here
    found = shutil.which("fimlsp")
    if found is None:
        pytest.skip("the fimlsp command is not installed (pip install -e .)")
    return Path(found).parent


def run_emacs(args: list[str], home: Path, env: dict[str, str] | None = None) -> str:
    reason = emacs_with_eglot()
    if reason is not None:
        pytest.skip(reason)
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["emacs", "--batch", *args],
        capture_output=True,
        text=True,
        timeout=180,
        # A private HOME: nothing of the user's Emacs is read, nothing is written there.
        env={**os.environ, "HOME": str(home), **(env or {})},
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return output


def offset(text: str, line: int, character: int) -> int:
    """An LSP position in ``text`` (ASCII here, so UTF-16 columns are characters)."""
    lines = text.split("\n")
    return sum(len(s) + 1 for s in lines[:line]) + character


@needs_emacs
def test_config_byte_compiles_without_warnings(tmp_path: Path) -> None:
    copy = tmp_path / "fimlsp.el"
    shutil.copy(CONFIG, copy)
    output = run_emacs(
        ["--eval", "(setq byte-compile-error-on-warn t)", "-f", "batch-byte-compile", str(copy)],
        tmp_path / "home",
    )
    assert (tmp_path / "fimlsp.elc").is_file(), output


@needs_emacs
def test_eglot_completes_with_fimlsp(tmp_path: Path, stopping_model: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    files = []
    for name, text, _ in CASES:
        (project / name).write_text(text, encoding="utf-8")
        files.append(str(project / name))
    driver = tmp_path / "driver.el"
    driver.write_text(DRIVER, encoding="utf-8")
    env = {
        "PATH": f"{fimlsp_dir()}{os.pathsep}{os.environ.get('PATH', '')}",
        "FIMLSP_CACHE_DIR": str(tmp_path / "cache"),
        "FIMLSP_TEST_MODEL": str(stopping_model),
        "FIMLSP_TEST_FILES": "\n".join(files),
        "FIMLSP_TEST_CURSORS": "\n".join(f"{line} {col}" for _, _, (line, col) in CASES),
    }
    output = run_emacs(["-l", str(CONFIG), "-l", str(driver)], tmp_path / "home", env)
    lines = [s for s in output.splitlines() if s.startswith("FIMLSP-RESULT ")]
    assert lines, output[-4000:]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("FIMLSP-RESULT "))

    # fimlsp.el started the command it names, with the options the user set.
    assert result["command"] == ["fimlsp", "--stdio"]
    assert result["servers"] == 1  # both files share one server
    status = result["status"]
    assert status["state"] == "ready", status
    assert status["settings"]["model"] == str(stopping_model)
    assert status["settings"]["max_tokens"] == 48
    assert status["settings"]["deadline_ms"] == 8000  # eglot-workspace-configuration

    for (name, text, (line, col)), case in zip(CASES, result["cases"]):
        assert case["before"] == text
        assert case["capf"] is True, (name, case)
        assert case["items"], (name, case)
        edit = case["items"][0]["textEdit"]
        start = offset(text, **edit["range"]["start"])
        end = offset(text, **edit["range"]["end"])
        assert end == offset(text, line, col)
        # The buffer holds exactly the server's edit: Eglot replaced what the item said.
        expected = text[:start] + edit["newText"] + text[end:]
        assert case["after"] == expected, (name, case)
        assert case["after"] != text
        ast.parse(case["after"])
        assert (project / name).read_text(encoding="utf-8") == case["after"]
        # Eglot told the server about the edit: both copies agree.
        digest = hashlib.sha256(case["after"].encode()).hexdigest()
        assert case["server"]["sha256"] == digest, (name, case["server"])
    # The second case replaced a word: the item starts before the cursor.
    word_edit = result["cases"][1]["items"][0]["textEdit"]["range"]
    assert word_edit["start"]["character"] < word_edit["end"]["character"]
