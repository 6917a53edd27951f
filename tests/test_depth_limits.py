"""fimlsp's bracket limit per target against each pyenv interpreter's own ``ast.parse``."""

from __future__ import annotations

import subprocess

import pytest

from bench.oracle import pyenv_interpreter
from lexer.tables import max_paren_level
from lexer.version import TargetVersion
from quotient_parser.recognizer import Recognizer

_VERDICTS = """
import ast, sys
for text in sys.stdin.read().split("\\0"):
    try:
        ast.parse(text)
        print(1)
    except (SyntaxError, MemoryError, RecursionError):
        print(0)
"""


@pytest.mark.parametrize("version", ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"])
def test_the_bracket_limit_is_the_interpreters(version: str) -> None:
    python = pyenv_interpreter(version)
    if python is None:
        pytest.skip(f"no pyenv interpreter for {version}")
    target = TargetVersion.parse(version)
    limit = max_paren_level(target.code)
    texts = [
        f"x = {'(' * n}1{')' * n}\n" if call == "" else f"x = {'f(' * n}y{')' * n}\n"
        for call in ("", "f")
        for n in (limit, limit + 1)
    ]
    joined = "\0".join(texts)
    run = subprocess.run(
        [python, "-c", _VERDICTS], input=joined, capture_output=True, text=True, check=True
    )
    cpython = [line == "1" for line in run.stdout.split()]
    recognizer = Recognizer(version)
    assert [recognizer.recognize(text) for text in texts] == cpython == [True, False] * 2
