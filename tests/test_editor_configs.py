"""The editor configurations under ``editors/other``: they parse, start ``fimlsp --stdio``,
and the real server accepts the settings they send as initializationOptions.

Cheap and always run; the tests that drive a real editor are in ``test_editor_emacs.py``
and ``test_editor_helix.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from lsp_server.settings import Settings

REPO = Path(__file__).resolve().parents[1]
OTHER = REPO / "editors" / "other"
HELIX = OTHER / "helix" / "languages.toml"
SUBLIME = OTHER / "sublime" / "LSP.sublime-settings"
EMACS = OTHER / "emacs" / "fimlsp.el"
COMMAND = ["fimlsp", "--stdio"]


def toml_loads(text: str) -> dict[str, Any]:
    module = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    data: dict[str, Any] = module.loads(text)
    return data


def helix_config() -> dict[str, Any]:
    return toml_loads(HELIX.read_text(encoding="utf-8"))


def sublime_config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SUBLIME.read_text(encoding="utf-8"))
    return data


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def fimlsp_executable() -> str:
    """The ``fimlsp`` console script of this interpreter's environment, else the one on PATH."""
    here = Path(sys.executable).parent / "fimlsp"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("fimlsp")
    if found is None:
        pytest.skip("the fimlsp command is not installed (pip install -e .)")
    return found


def assert_settings_accepted(options: dict[str, Any]) -> Settings:
    settings, problems = Settings().merged(options)
    assert problems == [], problems
    return settings


# ----------------------------------------------------------------------------- Helix


def test_helix_languages_toml_starts_fimlsp_for_python() -> None:
    config = helix_config()
    server = config["language-server"]["fimlsp"]
    assert [server["command"], *server["args"]] == COMMAND
    assert isinstance(server.get("timeout", 20), int)
    settings = assert_settings_accepted(server["config"])
    assert settings.max_tokens == server["config"]["maxTokens"]
    (python,) = [lang for lang in config["language"] if lang["name"] == "python"]
    names = [s if isinstance(s, str) else s["name"] for s in python["language-servers"]]
    assert "fimlsp" in names
    for entry in python["language-servers"]:
        if isinstance(entry, dict) and entry["name"] == "fimlsp":
            # Helix's feature name; fimlsp serves completion and nothing else.
            assert "completion" in entry.get("only-features", ["completion"])


# ----------------------------------------------------------------------------- Sublime


def test_sublime_settings_start_fimlsp_for_python() -> None:
    client = sublime_config()["clients"]["fimlsp"]
    assert client["command"] == COMMAND
    assert client["enabled"] is True
    assert "source.python" in client["selector"]
    assert_settings_accepted(client["initializationOptions"])


# ----------------------------------------------------------------------------- Emacs


def test_emacs_file_names_the_command_and_its_options() -> None:
    """A light look at the Lisp; ``test_editor_emacs.py`` runs it in a real Emacs."""
    text = EMACS.read_text(encoding="utf-8")
    assert '(defcustom fimlsp-command \'("fimlsp" "--stdio")' in text
    assert ":initializationOptions" in text
    assert "eglot-server-programs" in text
    code = re.sub(r'"(?:\\.|[^"\\])*"|;.*', "", text)  # without strings and comments
    assert code.count("(") == code.count(")")


# ----------------------------------------------------------------------------- docs


def test_readme_lists_every_setting() -> None:
    readme = (OTHER / "README.md").read_text(encoding="utf-8")
    for field in dataclasses.fields(Settings):
        assert f"`{camel(field.name)}`" in readme, field.name
    for path in (HELIX, SUBLIME, EMACS):
        assert path.relative_to(OTHER).as_posix() in readme


# ----------------------------------------------------------------------------- server


class StdioClient:
    """Just enough of an LSP client to send one editor's initializationOptions to the
    real server and read back what it made of them."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self.messages.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            assert length is not None
            self.messages.put(json.loads(stream.read(length)))

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def request(self, method: str, params: Any, timeout: float = 30) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            try:
                message = self.messages.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no answer to {method} in {timeout} s") from None
            if message is None:
                raise AssertionError(f"the server exited: {self.stderr()}")
            if "method" in message and "id" in message:  # a request from the server
                self.send({"id": message["id"], "result": None})
            elif message.get("id") == self.next_id:
                assert "error" not in message, message
                return message.get("result")

    def stderr(self) -> str:
        self.proc.kill()
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> int:
        try:
            self.request("shutdown", None, timeout=10)
            self.send({"method": "exit"})
            return self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.mark.parametrize("editor", ["helix", "sublime"])
def test_server_takes_the_editor_settings(editor: str, tmp_path: Path) -> None:
    """``fimlsp --stdio`` started as the configuration says, initialized with its options
    (the model switched off, so nothing loads), reports exactly those settings."""
    if editor == "helix":
        server = helix_config()["language-server"]["fimlsp"]
        command, options = [server["command"], *server["args"]], server["config"]
    else:
        client = sublime_config()["clients"]["fimlsp"]
        command, options = client["command"], client["initializationOptions"]
    assert command[0] == "fimlsp"
    options = {**options, "enable": False}
    env = {**os.environ, "FIMLSP_CACHE_DIR": str(tmp_path / "cache")}
    lsp = StdioClient([fimlsp_executable(), *command[1:]], env)
    try:
        init = lsp.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": tmp_path.as_uri(),
                "capabilities": {},
                "initializationOptions": options,
            },
        )
        assert init["serverInfo"]["name"] == "fimlsp"
        assert init["capabilities"]["completionProvider"] is not None
        lsp.send({"method": "initialized", "params": {}})
        expected = dataclasses.asdict(assert_settings_accepted(options))
        for _ in range(100):  # the settings apply once "initialized" has been handled
            status = lsp.request("fimlsp/serverStatus", {})
            if status["settings"] == expected:
                break
            time.sleep(0.05)
        assert status["settings"] == expected
        assert status["state"] == "disabled"
    except BaseException:
        print(lsp.stderr())
        raise
    assert lsp.close() == 0
