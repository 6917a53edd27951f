"""Shared fixtures and options for the fimlsp test suite.

* ``target``: the running interpreter's (major, minor) version.  Tests that
  compare with CPython use the running interpreter's ``ast.parse`` as the
  oracle, so they always recognize for that version.
* ``rec``: a :class:`quotient_parser.Recognizer` for ``target``.
* ``ast_accepts``: the oracle, ``ast.parse`` of the running interpreter.
* Tests marked ``slow`` run only with ``--runslow`` or ``FIMLSP_SLOW=1``.
* Hypothesis profiles: ``default`` (quick), ``ci`` (the same, derandomized;
  chosen when ``CI`` is set) and ``thorough``; pick one with
  ``HYPOTHESIS_PROFILE=name``.
"""

from __future__ import annotations

import ast
import os
import sys
import warnings
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings

from quotient_parser import Recognizer

settings.register_profile(
    "default",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=500)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default")
)

TARGET: tuple[int, int] = (sys.version_info.major, sys.version_info.minor)


def ast_accepts(source: str | bytes) -> bool:
    """Whether CPython's ``ast.parse`` (this interpreter) accepts ``source``.

    Every exception counts as a rejection: ``ValueError`` for NUL characters
    before 3.12, ``MemoryError`` or ``RecursionError`` for too-deep nesting.
    Warnings (invalid escape sequences and the like) are not errors.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(source)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return False
    return True


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or os.environ.get("FIMLSP_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: use --runslow or FIMLSP_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def target() -> tuple[int, int]:
    return TARGET


@pytest.fixture(scope="session")
def rec() -> Recognizer:
    return Recognizer(target=TARGET)


@pytest.fixture(scope="session", name="ast_accepts")
def ast_accepts_fixture() -> Callable[[str | bytes], bool]:
    return ast_accepts
