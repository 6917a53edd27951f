"""bench.fim_quality on a few cuts with the tiny model: the report adds up and is sound."""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from model_fixtures import model_cache, tiny_factory, tiny_model_path  # noqa: F401

from bench import fim_quality

STDLIB = Path(sys.modules["json"].__file__ or "").parent  # a small package of real code


def _run(model: Path, *extra: str) -> dict[str, object]:
    out = io.StringIO()
    argv = [str(STDLIB), "--model", str(model), "--n", "2", "--max-tokens", "6",
            "--json", "--details", "--no-progress", "--ctx-size", "1024", *extra]  # fmt: skip
    status = fim_quality.main(argv, out=out)
    result: dict[str, object] = json.loads(out.getvalue())
    assert status == 0, "constrained decoding claimed a middle that does not parse"
    return result


def _check(result: dict[str, object]) -> None:
    cases = result["cases"]
    assert cases == 4 and result["cases_by_kind"] == {"boundary": 2, "randspan": 2}
    for mode in fim_quality.MODES:
        m = result[mode]
        assert isinstance(m, dict)
        assert m["success"] + m["failure"] == cases
    assert result["constrained"]["claimed_success_but_invalid"] == 0  # type: ignore[index]
    assert result["constrained"]["success_commenting_out_right"] == 0  # type: ignore[index]
    table = result["table"]
    assert isinstance(table, dict)
    assert table["total"]["total"] == cases
    assert table["unconstrained_ok"]["total"] + table["unconstrained_fail"]["total"] == cases
    assert result["wall_ratio_constrained_over_unconstrained"] is not None


def test_one_process(tiny_model_path: Path) -> None:
    _check(_run(tiny_model_path))


def test_modes_runs_only_the_modes_asked_for(tiny_model_path: Path) -> None:
    full = _run(tiny_model_path)
    only = _run(tiny_model_path, "--modes", "unconstrained")  # constrained is always run
    assert only["modes"] == ["constrained", "unconstrained"]
    assert "checked" not in only and "heuristic" not in only and only["table"] is None
    details = only["details"]
    assert isinstance(details, list) and all(set(d["runs"]) == set(only["modes"]) for d in details)
    for figure in ("success", "exact_match", "claimed_success"):
        assert only["constrained"][figure] == full["constrained"][figure]  # type: ignore[index]


def test_worker_processes_take_the_same_cuts(tiny_model_path: Path) -> None:
    one, two = _run(tiny_model_path), _run(tiny_model_path, "--jobs", "2")
    _check(two)

    def cuts(result: dict[str, object]) -> list[object]:
        details = result["details"]
        assert isinstance(details, list)
        return [(d["file"], d["offsets"]) for d in details]

    assert cuts(one) == cuts(two)


def test_budget_sweep_and_steering_columns(tiny_model_path: Path, tmp_path: Path) -> None:
    """--budgets and --inside-compare: the sweep's figures per variant and budget, the
    steering columns, and bench.report's budget section and plot drawn from them."""
    result = _run(tiny_model_path, "--budgets", "4", "6", "--inside-compare")
    _check(result)
    sweep = result["budget_sweep"]
    assert isinstance(sweep, dict) and sweep["budgets"] == [4, 6] and sweep["cases"] == 4
    for figure in ("success", "exact_match", "witness_endings", "mean_logprob"):
        assert set(sweep[figure]) == set(fim_quality.SWEEP_VARIANTS), figure
        assert all(len(values) == 2 for values in sweep[figure].values())
    # at the main budget the sweep reuses the main runs
    assert sweep["success"]["constrained"][1] == result["constrained"]["success"]  # type: ignore[index]
    assert all(0 <= n <= 4 for values in sweep["success"].values() for n in values)
    constrained = result["constrained"]
    assert isinstance(constrained, dict)
    assert constrained["witness_endings"] == 0  # off by default
    successes = constrained["success"]
    written = successes - constrained["forced_successes"]
    assert constrained["model_written_successes"] == written
    assert constrained["model_written_share"] == (
        round(written / successes, 4) if successes else None
    )
    assert constrained["steered_stops"] <= constrained["claimed_success"]
    assert result["steer_samples"] == result["parser_samples"]  # one per constrained step
    inside = result["stay_inside_compare"]
    assert isinstance(inside, dict) and inside["cuts"] == 4
    pytest.importorskip("matplotlib")
    from bench import report

    report.plot_budget({"budget_sweep": sweep}, tmp_path / "budget.png")
    assert (tmp_path / "budget.png").stat().st_size > 0
    text = "\n".join(report._budget_section({"budget_sweep": sweep}))
    assert "constrained_unsteered" in text and "4 tokens" in text
    quality = "\n".join(report._quality_section(result))
    assert "model-written share" in quality and "stayInside on against off on 4 cuts" in quality


def test_a_success_with_a_forced_token_is_not_model_written() -> None:
    """A token steering forced (one the model ranked nowhere) counts the success out of
    the model-written share, as a witness ending does."""
    runs = [
        fim_quality.Run("x", "steered", True, 1, "", 0.0, 0.0, None, [], success=True, forced=n)
        for n in (0, 1)
    ]
    figures = fim_quality._steering_figures(runs)
    assert figures["model_written_share"] == 0.5 and figures["model_written_successes"] == 1
    assert figures["forced_successes"] == 1


def test_comments_out_right_judges_by_tokenize() -> None:
    """Only a comment the middle opens that runs on into R's first line of text counts."""
    swallowing = fim_quality.comments_out_right
    assert swallowing("x = f(1)", " # note", " + 2\ny = 3\n")
    assert not swallowing("x = f(1)", " # note", "\ny = 3\n")  # R's first line is blank
    assert not swallowing("x = f(1)", " # note\n", "y = 3\n")  # the comment ends first
    assert not swallowing("x = 1  # a", " b", " c\ny = 3\n")  # the cursor was inside one
    assert not swallowing('x = "#', '"', " + y\n")  # a '#' inside a string
    # The cut split a comment: R's first line was comment text in the file too.
    left, right = "if x:\n    y = 1", " and flush it\n    z = 2\n"
    assert swallowing(left, "  # Terminate", right)
    assert not swallowing(left, "  # Terminate", right, "  # Write")
    assert swallowing("x = f(1)", " # note", " + 2\ny = 3\n", "")  # the file had code there
    # The cursor was in the left context's comment, which R's first line ends; the
    # middle ends that comment, writes code and opens one of its own (test_email.py).
    left, right = "# This has enough", "d always end up b encoded.\nm = 1\n"
    assert not swallowing(left, " text.\nm = 2 #", right, " non-ascii that it shoul")
    assert swallowing("x = 1  # a", "\nm = 2 #", " + 3\n", "\ny = 2")  # R's line was code
