"""``bench.finish_distance`` on a small file: it runs, reports, and notices a broken bound."""

from __future__ import annotations

import io
import json

import pytest

from bench.corpus import stdlib_root
from bench.finish_distance import main, pieces
from quotient_parser.finish import FinishAnalysis


def test_pieces_cover_the_middle() -> None:
    middle = "foo(a, b)\n    return x.y  # c\n"
    assert "".join(pieces(middle)) == middle
    assert pieces("x = f(1)") == ["x", " =", " f", "(", "1", ")"]


def test_main_json() -> None:
    source = str(stdlib_root() / "colorsys.py")
    out = io.StringIO()
    status = main([source, "--n", "3", "--witnesses", "2", "--json", "--no-progress"], out=out)
    data = json.loads(out.getvalue())
    assert status == 0, data["witness"]["problems"]
    assert data["cuts"] == 6
    assert data["distance_us"]["samples"] > 20
    assert data["witness"]["states"] > 0 and data["witness"]["found"] > 0
    assert sum(data["stay_inside"]["true_middles"].values()) == 6


def test_a_bound_above_a_witness_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FinishAnalysis, "lower_bound", lambda self, state: 999)
    source = str(stdlib_root() / "colorsys.py")
    out = io.StringIO()
    assert main([source, "--n", "2", "--json", "--no-progress"], out=out) == 1
    problems = json.loads(out.getvalue())["witness"]["problems"]
    assert problems and "bound" in problems[0]["problem"]
