"""A short seeded fuzz run (bench.lsp_fuzz) over every class, against the server as
``fimlsp --stdio`` starts it, with the tiny stopping model.

Each class is held to the issue's bar: no crash, no server that stops reading, no
request left unanswered, no exit code against the specification, no document out of
sync, no completion that does not parse.  The longer run with its figures is
``python -m bench.lsp_fuzz --seconds 600 --seed 1``.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

from lsp_fixtures import stopping_model
from model_fixtures import model_cache, tiny_factory

from bench.lsp_fuzz import CLASSES, Options, fuzz, lag_by_case, memory_by_minute

__all__ = ["model_cache", "stopping_model", "tiny_factory"]  # fixtures used by name

#: Cases swept once each, in order: every class, and the ones that show each finding.
CASES = (
    # protocol: all of them (each takes milliseconds)
    "bad_params",
    "odd_ids",
    "bad_envelopes",
    "unknown_methods",
    "notifications_with_ids",
    "responses_to_nothing",
    "bad_cancellations",
    "initialize_again",
    "bad_configuration",
    # framing: a crash, a frame that never heals, an error owed with a null id, a frame
    # written in pieces
    "absurd_length",
    "lowercase_header",
    "body_not_an_object",
    "split_writes",
    # documents: a long literal (a completion after it: the stopping model closes the
    # bracket that ends the file), lone surrogates, an integer CPython refuses (the emoji
    # have their own test below)
    "long_string_line",
    "lone_surrogate",
    "integer_over_the_digit_limit",
    # storm: versions past int32, ranges the protocol gives no meaning, 60 changes
    "odd_versions",
    "out_of_range_changes",
    "typing_storm",
    "session",
)

SERVERS = {"fimlsp": (sys.executable, "-m", "lsp_server.cli", "--stdio")}
PROPERTIES = (
    "crashes",
    "deaf",
    "unanswered",
    "exit_code_mismatches",
    "desyncs",
    "invalid_completions",
)


@pytest.fixture(scope="module")
def summaries(stopping_model: Path) -> dict[str, dict[str, Any]]:
    """One sweep per server (about 20 s each on two busy cores)."""
    results = {}
    for name, command in SERVERS.items():
        options = Options(
            seconds=120,
            seed=0,
            model=str(stopping_model),
            classes=CLASSES,
            cases=CASES,
            sweep=True,
            server=command,
            storm_changes=60,
            deadline_ms=1000,
            heal_timeout=2.0,
            rotate_s=1e9,
        )
        results[name] = asyncio.run(fuzz(options))
    return results


@pytest.mark.parametrize(
    "server, cls, prop",
    [
        pytest.param(server, cls, prop, id=f"{server}-{cls}-{prop}")
        for server in SERVERS
        for cls in CLASSES
        for prop in PROPERTIES
    ],
)
def test_fuzz(summaries: dict[str, dict[str, Any]], server: str, cls: str, prop: str) -> None:
    summary = summaries[server]
    found = summary["by_class"][cls][prop]
    details = {
        "unanswered": summary["unanswered_by_case"] | summary["null_id_errors_owed_not_sent"],
        "crashes": [(c["case"], c["exit_code"]) for c in summary["crashes"]],
        "deaf": summary["deaf"] + summary["unresponsive"],
        "exit_code_mismatches": summary["exit_code_mismatches"],
        "desyncs": summary["desync_cases"],
        "invalid_completions": summary["invalid_samples"],
    }[prop]
    assert found == 0, f"{found} {prop} in class {cls}: {details}"


def test_every_class_ran(summaries: dict[str, dict[str, Any]]) -> None:
    for summary in summaries.values():
        for cls in CLASSES:
            assert summary["by_class"][cls]["requests"] > 0, cls
        assert summary["completions_checked"] > 0
        # The server's loop-lag monitor answered the probes (its figures: the benchmark).
        assert summary["longest_loop_lag_case"], summary["longest_loop_lag_ms"]
        # Its ticks were counted for the cases running (its stalls by case: the benchmark).
        assert summary["loop_lag_ticks"] > 0
        assert all(row["stalls"] > 0 for row in summary["loop_lag_by_case"].values())
        # The memory by minute tops out where the whole session's does.
        by_minute = summary["memory_by_minute"]
        assert max(front for _, front, _ in by_minute) == summary["rss_mb_max"]


def test_loop_lag_stalls_are_told_by_case_worst_first() -> None:
    ticks = Counter({"storm/a": 50, "documents/b": 40, "random/c": 30})
    stalls = [(6.0, 0.5, "storm/a"), (30.0, 25.0, "documents/b"), (9.5, 1.0, "storm/a")]
    assert lag_by_case(ticks, stalls) == {
        "documents/b": {
            "ticks": 40,
            "stalls": 1,
            "max_ms": 30.0,
            "stalls_ms": 30.0,
            "loop_cpu_ms": 25.0,
        },
        "storm/a": {"ticks": 50, "stalls": 2, "max_ms": 9.5, "stalls_ms": 15.5, "loop_cpu_ms": 1.5},
    }


def test_memory_is_reported_minute_by_minute() -> None:
    probes = [(100.0, 60.0, 100.0), (130.0, 64.0, None), (159.9, 62.0, 250.0), (221.0, 63.0, 240.0)]
    assert memory_by_minute(probes) == [(0, 64.0, 250.0), (2, 63.0, 240.0)]
    assert memory_by_minute([(5.0, 60.0, None)]) == [(0, 60.0, None)]
    assert memory_by_minute([]) == []


def test_inline_ranges_never_split_a_surrogate_pair(tiny_factory: Any) -> None:
    """A model that fills strings (`` x`` over end-of-sequence) gets completions at
    positions inside the emoji of ``s = "😀😀"``; each item's range must be a place in
    the text."""
    chatty = tiny_factory("fills-strings", stop_bias=30.0, token_bias={" x": 40.0})
    options = Options(
        seconds=60,
        seed=0,
        model=str(chatty),
        classes=("documents",),
        cases=("emoji",),
        sweep=True,
        deadline_ms=1000,
        max_tokens=4,
    )
    summary = asyncio.run(fuzz(options))
    assert summary["completions_checked"] > 0
    assert summary["invalid_completions"] == 0, summary["invalid_samples"]
