"""bench.lsp_latency end to end, small: the tiny model, 40 requests, both cancel styles."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

from lsp_fixtures import stopping_model
from model_fixtures import model_cache, tiny_factory

from bench import lsp_latency, report

__all__ = ["model_cache", "stopping_model", "tiny_factory"]  # fixtures used by name


@pytest.mark.parametrize("cancel", ["explicit", "supersede"])
def test_latency_benchmark_runs(stopping_model: Path, cancel: str) -> None:
    out = io.StringIO()
    argv = ["--model", str(stopping_model), "--requests", "40", "--typing-ms", "10",
            "--cancel", cancel, "--cold-open", "0", "--json", "--no-progress"]  # fmt: skip
    assert lsp_latency.main(argv, out=out) == 0
    report = json.loads(out.getvalue())
    for key in ("requests", "latency_ms_p50", "latency_ms_p95", "cancelled", "errors",
                "rss_mb_after"):  # fmt: skip
        assert key in report
    assert report["requests"] == 40
    assert report["errors"] == 0
    assert report["server_pending_after"] == 0
    assert report["answered"] + report["cancelled"] == 40
    assert report["rss_mb_after"] > 0 and report["engine_rss_mb_after"] > 0
    if cancel == "supersede":
        assert report["cancel_sent"] == 0


def test_report_shows_the_latency_figures(stopping_model: Path) -> None:
    out = io.StringIO()
    argv = ["--model", str(stopping_model), "--requests", "20", "--typing-ms", "10",
            "--cold-open", "2", "--cold-pause-ms", "300", "--json", "--no-progress"]  # fmt: skip
    assert lsp_latency.main(argv, out=out) == 0
    figures = json.loads(out.getvalue())
    cold = figures["cold_open"]
    assert cold["files"] == cold["answered"] == 2 and cold["errors"] == 0
    assert cold["rss_mb_after"] > 0 and cold["engine_rss_mb_after"] > 0
    assert len(cold["requests"]) == 2
    assert figures["prompt_tokens"] >= figures["prompt_tokens_evaluated"] > 0
    config = {"date": "today", "command": "test", "quick": True, "seed": 0, "elapsed_s": 1,
              "machine": report.machine_info()}  # fmt: skip
    text = report.markdown({"lsp": figures}, config)
    assert "## Language server while typing" in text
    assert f"{figures['latency_ms_p50']} / {figures['latency_ms_p95']} ms" in text
    assert "Cold open: 2 files" in text and "llama.cpp thread(s)" in text
