"""``bench.llama_server``: llama.cpp's own server, built once from the vendored sources, run.

The binary is built into the user's fimlsp cache (not the session's private one), once:
the first run of the suite on a machine compiles it (minutes), later runs find it.  Where
it cannot be built (no CMake or compiler, no source distribution) the tests that need it
skip and say why; a build that fails is an error.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from model_fixtures import model_cache, tiny_factory, tiny_model_path

from bench.llama_server import (
    BuildUnavailable,
    build_llama_server,
    cached_binary,
    free_port,
    llama_cpp_version,
    running_llama_server,
    start_llama_server,
)
from lsp_server.model.cache import cache_dir

__all__ = ["model_cache", "tiny_factory", "tiny_model_path"]  # fixtures used by name

#: The user's cache, read before ``model_fixtures`` points FIMLSP_CACHE_DIR at a session
#: folder: the server is built there once, not once per test session.
USER_CACHE = cache_dir()
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The llama-server binary, built on first use; skips where it cannot be built."""
    try:
        return build_llama_server(root=USER_CACHE)
    except BuildUnavailable as exc:
        pytest.skip(f"llama-server cannot be built here: {exc}")


def test_print_path_prints_the_cached_binary(llama_server_binary: Path) -> None:
    env = dict(os.environ, FIMLSP_CACHE_DIR=str(USER_CACHE), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "bench.llama_server", "--print-path"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(llama_server_binary)
    assert "building" not in done.stderr  # cached: nothing was compiled
    info = json.loads((llama_server_binary.parents[1] / "build.json").read_text())
    assert info["version"] == llama_cpp_version() and "-DGGML_NATIVE=OFF" in info["flags"]
    assert cached_binary(root=USER_CACHE) == llama_server_binary


def test_no_compiler_is_a_reason_to_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without CMake or a compiler the build says so (and the tests skip with it)."""
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(BuildUnavailable, match=r"cmake.*not found"):
        build_llama_server(root=tmp_path)
    assert cached_binary(root=tmp_path) is None


def test_server_comes_up_and_always_goes_away(
    llama_server_binary: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    with running_llama_server(
        llama_server_binary, tiny_model_path, parallel=2, ctx_size=512, log_dir=tmp_path
    ) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/props")
        props = json.loads(conn.getresponse().read())
        conn.close()
        assert props["total_slots"] == 2 and props["model_path"] == str(tiny_model_path)
        assert props["default_generation_settings"]["n_ctx"] == 256  # 512 shared by 2 slots
        process = server.process
    assert process.poll() is not None  # stopped on leaving the block
    with (
        pytest.raises(RuntimeError, match="boom"),
        running_llama_server(llama_server_binary, tiny_model_path, log_dir=tmp_path) as server,
    ):
        process = server.process
        raise RuntimeError("boom")
    assert process.poll() is not None  # and when the block raises


def test_a_server_that_cannot_start_reports_its_log(
    llama_server_binary: Path, tmp_path: Path
) -> None:
    not_a_model = tmp_path / "broken.gguf"
    not_a_model.write_bytes(b"GGUF" + b"\0" * 64)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="llama-server exited"):
        start_llama_server(llama_server_binary, not_a_model, log_dir=tmp_path, port=free_port())
    assert time.monotonic() - started < 60
