"""How often does a filled-in middle make the file parse: constrained vs. unconstrained.

Usage::

    python -m bench.fim_quality [PATHS...] [--model SPEC] [--cuts boundary|randspan|both]
        [--n N] [--seed S] [--max-tokens N] [--target X.Y] [--oracle PYTHON] [--json]
        [--no-token-healing] [--heal-compare] [--no-steering] [--witness-ending]
        [--no-stay-inside] [--inside-compare] [--budgets N...] [--jobs N]
        [--cases FILE:LINE:COL,...] [--failures-from JSON]

The cuts are those of ``bench.quotient_check`` (``--n`` of each kind, each from a file
picked uniformly; PATHS default to the running interpreter's standard library): the
middle of each cut is thrown away and the model fills it in three ways, with the same
model and settings (greedy unless ``--temperature`` is given).  ``--cases`` keeps only
the cuts named (``FILE:LINE:COL`` as the report writes them); ``--failures-from`` reruns
the cuts whose constrained middle failed in an earlier ``--json --details`` report:

``constrained``    the syntax-checked decoding loop of ``lsp_server.decoding``;
``unconstrained``  the model's own tokens, no checks;
``checked``        unconstrained, then cut back to the longest prefix with which the
                   file parses (``ast.parse`` of this interpreter).

A middle *succeeds* when the oracle (``ast.parse`` in ``--oracle``, by default this
interpreter, through ``bench.grammar_coverage``'s worker) accepts ``L + middle + R``.
``success_commenting_out_right`` counts the successes that get there by opening a
comment that turns R's first line of code into comment text (judged by CPython's
``tokenize``, independently of the quotient): valid, but no completion a user wants,
and what constrained decoding refuses (``QuotientState.lands``).
The summary follows Table I of the seed paper: rows Unconstrained ✓, Unconstrained ✗
and, among the latter, Checked ✗; columns Constrained ✓ / ✗.  A mode *claims* success
when its completion says ``complete``; ``claimed_success_but_invalid`` counts claims the
oracle rejects and must be 0 for constrained decoding (the exit status is 1 otherwise).

Timings: before the three modes run, the cut's prompt is evaluated once (its time is
``prompt_ms``), so each mode finds it in the model's KV cache and ``total_ms`` compares
quotient construction plus decoding.  The parser time per token is the time the
constrained loop spent in the quotient (viability of candidates and completeness checks)
for one generated token; the time steering spent on top of it (distances, the candidates
it weighed) is reported beside it.  The distance's per-terminal tables are built before
the first cut (``YieldTables.warm_up``), as a running server has them.

``--heal-compare`` also runs constrained decoding with token healing switched the other
way on the boundary cuts, whose cursor usually sits inside a word, and reports both
success counts.

Steering (``lsp_server/decoding/steering.py``) is on unless ``--no-steering``; the
constrained figures count the successes steering had a hand in (a token chosen by it),
the stops where it brought the middle to a finish, witness endings (only with
``--witness-ending``; the rest are *model-written*), the cuts where a token came from
further down the ranking than the top k, and the mean length-normalised
log-probability of the middles returned.  ``stayInside`` is on unless
``--no-stay-inside``; ``--inside-compare`` runs constrained decoding with it switched
the other way too and reports how often the answer changes, whether both parse, and
how many true middles stay inside.

``--budgets 8 16 32 64`` adds a sweep: on the same cuts, each of those token budgets
with the three modes and with constrained decoding without steering (success counts
per budget; the plot of ``bench.report``).
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import shutil
import sys
import time
import tokenize
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Literal

from bench.grammar_coverage import (
    CorpusFile,
    LineIndex,
    Oracle,
    OracleFailure,
    add_corpus_arguments,
    discover,
    stdlib_corpus,
    stdlib_root,
    with_progress,
)
from bench.harness import rounded_percentile
from bench.quotient_check import CUT_KINDS, Corpus, Cut, make_cuts
from bench.undefined_names import undefined_in_middle
from lexer.version import TargetVersion
from lsp_server.decoding import Completion, DecodeOptions, build_prompt, generate
from lsp_server.decoding.edit_distance import edit_similarity
from lsp_server.model import Backend, FimModel, ModelError, open_model
from lsp_server.modes import MODES, Mode
from quotient_parser.quotient import Quotient, QuotientBuilder
from quotient_parser.yields import yield_tables

#: The sweep's variants: the three modes, and constrained decoding without steering.
SWEEP_VARIANTS = (*MODES, "constrained_unsteered")

# --------------------------------------------------------------------------- one cut


@dataclass
class Run:
    """One mode's completion of one cut, and the oracle's verdict on it."""

    middle: str
    stop_reason: str
    complete: bool | None
    tokens: int
    healed: str
    total_ms: float
    generate_ms: float
    quotient_ms: float | None
    parser_us: list[float]
    steer_us: list[float] = field(default_factory=list)
    steered: int = 0
    rescued: int = 0
    forced: int = 0
    witness: str = ""
    inside_fallback: bool = False
    restarted: bool = False
    mean_logprob: float | None = None
    success: bool = False
    verdict: str = ""  # the oracle's words when it rejects (or gave no answer)
    comments_out_right: bool = False  # a success only by commenting out R's first line
    #: names the middle loads that are bound nowhere (pyflakes' F821 inside the middle);
    #: None where not judged (the file does not parse, or the middle is blank)
    undefined: list[str] | None = None

    @classmethod
    def of(cls, c: Completion) -> Run:
        return cls(
            middle=c.middle,
            stop_reason=str(c.stop_reason),  # a plain string in the report
            complete=c.complete,
            tokens=c.tokens,
            healed=c.healed,
            total_ms=c.timings.total_ms,
            generate_ms=c.timings.generate_ms or 0.0,
            quotient_ms=c.timings.quotient_ms,
            parser_us=list(c.parser_us),
            steer_us=list(c.steer_us),
            steered=c.steered,
            rescued=c.rescued,
            forced=c.forced,
            witness=c.witness,
            inside_fallback=c.inside_fallback,
            restarted=c.restarted,
            mean_logprob=c.mean_logprob,
        )

    @property
    def claimed_but_invalid(self) -> bool:
        return self.complete is True and not self.success


@dataclass
class CaseResult:
    cut: Cut
    where: str
    cursor_in_word: bool = False  # after a letter, digit or underscore: healing may apply
    prompt_ms: float = 0.0
    prompt_tokens: int = 0
    runs: dict[str, Run] = field(default_factory=dict)
    #: constrained with token healing on and off (--heal-compare, boundary cuts)
    heal: dict[Literal["on", "off"], Run] = field(default_factory=dict)
    #: constrained with stayInside on and off (--inside-compare)
    inside: dict[Literal["on", "off"], Run] = field(default_factory=dict)
    #: whether the true middle stays inside the construct at the cursor (--inside-compare)
    true_stays_inside: bool | None = None
    #: constrained with knownNames on and off (--names-compare)
    names: dict[Literal["on", "off"], Run] = field(default_factory=dict)
    #: per token budget, per variant of SWEEP_VARIANTS (--budgets)
    sweep: dict[int, dict[str, Run]] = field(default_factory=dict)
    error: str | None = None

    def ok(self, mode: str) -> bool:
        return self.runs[mode].success


@dataclass(frozen=True)
class Config:
    options: DecodeOptions
    target: TargetVersion
    heal_compare: bool = False
    inside_compare: bool = False
    names_compare: bool = False
    budgets: tuple[int, ...] = ()
    #: The modes each cut runs in (constrained always: the comparisons start from it).
    modes: tuple[Mode, ...] = MODES


class CaseRunner:
    """Completes cuts with one model in every mode and has the oracle judge them."""

    def __init__(self, model: Backend, oracle: Oracle, cfg: Config) -> None:
        self.model = model
        self.oracle = oracle
        self.cfg = cfg
        # The distance's per-terminal tables outside the timings, as a long-running
        # server has them after its first requests (otherwise built on first use).
        recognizer = QuotientBuilder(cfg.target).recognizer
        yield_tables(recognizer.grammar, recognizer.automaton).warm_up()

    def _prime(self, left: str, right: str, options: DecodeOptions) -> tuple[float, int]:
        """Evaluate the prompt these options give into the KV cache, generating nothing;
        (milliseconds, prompt tokens)."""
        prompt, _ = build_prompt(self.model, left, right, options)
        t0 = time.perf_counter()
        self.model.prefill(prompt)
        return (time.perf_counter() - t0) * 1e3, len(prompt)

    def _complete(self, left: str, right: str, options: DecodeOptions) -> Run:
        return Run.of(generate(self.model, left, right, options, target=self.cfg.target))

    def run(self, cut: Cut, text: str) -> CaseResult:
        left, right = text[: cut.left_end], text[cut.middle_end :]
        in_word = left[-1:].isalnum() or left.endswith("_")
        result = CaseResult(cut, LineIndex(text).where(cut.left_end), in_word)
        opts = self.cfg.options
        try:
            result.prompt_ms, result.prompt_tokens = self._prime(left, right, opts)
            for mode in self.cfg.modes:
                result.runs[mode] = self._complete(left, right, replace(opts, mode=mode))
            if self.cfg.heal_compare and cut.kind == "boundary":
                other = replace(opts, mode="constrained", token_healing=not opts.token_healing)
                self._prime(left, right, other)
                same, flipped = result.runs["constrained"], self._complete(left, right, other)
                result.heal = {"on": same, "off": flipped} if opts.token_healing else {
                    "on": flipped, "off": same}  # fmt: skip
            if self.cfg.inside_compare:
                self._inside(result, left, right)
            if self.cfg.names_compare:
                other = replace(opts, mode="constrained", known_names=not opts.known_names)
                same, flipped = result.runs["constrained"], self._complete(left, right, other)
                result.names = {"on": same, "off": flipped} if opts.known_names else {
                    "on": flipped, "off": same}  # fmt: skip
            for budget in self.cfg.budgets:
                result.sweep[budget] = self._sweep(result, left, right, budget)
        except ModelError as exc:
            result.error = str(exc)
            return result
        runs = [*result.runs.values(), *result.heal.values(), *result.inside.values()]
        runs += result.names.values()
        runs += [run for variants in result.sweep.values() for run in variants.values()]
        verdicts = self.oracle.check_many([left + r.middle + right for r in runs])
        for r, verdict in zip(runs, verdicts):
            r.success = verdict.ok is True
            r.verdict = "" if r.success else verdict.describe()
            r.comments_out_right = r.success and comments_out_right(
                left, r.middle, right, cut.middle
            )
            if r.success and r.middle.strip():
                r.undefined = undefined_in_middle(left, r.middle, right)
        return result

    def _inside(self, result: CaseResult, left: str, right: str) -> None:
        """Constrained decoding with stayInside switched the other way, and whether the
        true middle stays inside."""
        opts = self.cfg.options
        other = replace(opts, mode="constrained", stay_inside=not opts.stay_inside)
        same, flipped = result.runs["constrained"], self._complete(left, right, other)
        result.inside = {"on": same, "off": flipped} if opts.stay_inside else {
            "on": flipped, "off": same}  # fmt: skip
        inside = Quotient(left, right, self.cfg.target, stay_inside=True)
        result.true_stays_inside = inside.initial.feed(result.cut.middle).complete

    def _sweep(self, result: CaseResult, left: str, right: str, budget: int) -> dict[str, Run]:
        """Every variant of the sweep at one token budget (the main runs where they are
        the same)."""
        opts = replace(self.cfg.options, max_tokens=budget)
        runs: dict[str, Run] = {}
        for variant in SWEEP_VARIANTS:
            if variant in result.runs and budget == self.cfg.options.max_tokens:
                runs[variant] = replace(result.runs[variant])  # a copy: judged again
                continue
            if variant == "constrained_unsteered":
                options = replace(opts, mode="constrained", steer=False)
            else:
                options = replace(opts, mode=variant)  # type: ignore[arg-type]
            runs[variant] = self._complete(left, right, options)
        return runs


# --------------------------------------------------------------------------- report


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 else None


@dataclass
class Report:
    model: str
    model_file: str
    model_family: str
    has_fim: bool
    target: TargetVersion
    oracle: str
    oracle_version: str
    corpus: str
    kinds: tuple[str, ...]
    n: int
    seed: int
    options: DecodeOptions
    heal_compare: bool
    inside_compare: bool = False
    names_compare: bool = False
    modes: tuple[Mode, ...] = MODES
    files_used: int = 0
    files_skipped: int = 0
    results: list[CaseResult] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def done(self) -> list[CaseResult]:
        return [r for r in self.results if r.error is None]

    def _mode(self, mode: str) -> dict[str, object]:
        runs = [r.runs[mode] for r in self.done]
        tokens = sum(x.tokens for x in runs)
        gen_ms = sum(x.generate_ms for x in runs)
        exact = sum(x.middle == r.cut.middle for x, r in zip(runs, self.done))
        return {
            "success": sum(x.success for x in runs),
            # an empty middle that parses is no answer a user sees
            "success_non_empty": sum(x.success and bool(x.middle.strip()) for x in runs),
            "failure": sum(not x.success for x in runs),
            "claimed_success": sum(x.complete is True for x in runs),
            "claimed_success_but_invalid": sum(x.claimed_but_invalid for x in runs),
            "success_commenting_out_right": sum(x.comments_out_right for x in runs),
            "exact_match": exact,
            "edit_similarity": _edit_similarity(runs, self.done),
            **_undefined_figures(runs),
            "tokens": tokens,
            "tokens_per_s": round(tokens / (gen_ms / 1e3), 1) if gen_ms > 0 else None,
            "total_ms": round(sum(x.total_ms for x in runs), 1),
            "generate_ms": round(gen_ms, 1),
            "stop_reasons": dict(Counter(x.stop_reason for x in runs).most_common()),
            **(_steering_figures(runs) if mode == "constrained" else {}),
        }

    def table(self) -> dict[str, dict[str, int]] | None:
        """Table I: rows by unconstrained (and checked) outcome, columns by constrained
        (None unless the three modes ran)."""
        if not {"constrained", "unconstrained", "checked"} <= set(self.modes):
            return None
        done = self.done

        def row(cases: list[CaseResult]) -> dict[str, int]:
            good = sum(r.ok("constrained") for r in cases)
            return {"constrained_ok": good, "constrained_fail": len(cases) - good,
                    "total": len(cases)}  # fmt: skip

        unconstrained_fail = [r for r in done if not r.ok("unconstrained")]
        return {
            "unconstrained_ok": row([r for r in done if r.ok("unconstrained")]),
            "unconstrained_fail": row(unconstrained_fail),
            "checked_fail": row([r for r in unconstrained_fail if not r.ok("checked")]),
            "total": row(done),
        }

    def heal_stats(self) -> dict[str, object] | None:
        cases = [r for r in self.done if r.heal]
        if not self.heal_compare:
            return None
        return {
            "cuts": len(cases),
            "cursor_in_word": sum(r.cursor_in_word for r in cases),
            "healed": sum(bool(r.heal["on"].healed) for r in cases),
            "constrained_success_with_healing": sum(r.heal["on"].success for r in cases),
            "constrained_success_without_healing": sum(r.heal["off"].success for r in cases),
            "exact_match_with_healing": sum(r.heal["on"].middle == r.cut.middle for r in cases),
            "exact_match_without_healing": sum(r.heal["off"].middle == r.cut.middle for r in cases),
        }

    def inside_stats(self) -> dict[str, object] | None:
        """stayInside on against off: how often the answer changes, and whether it parses."""
        if not self.inside_compare:
            return None
        cases = [r for r in self.done if r.inside]
        on = [r.inside["on"] for r in cases]
        off = [r.inside["off"] for r in cases]
        return {
            "cuts": len(cases),
            "answers_changed": sum(a.middle != b.middle for a, b in zip(on, off)),
            "success_staying_inside": sum(a.success for a in on),
            "success_not_staying_inside": sum(b.success for b in off),
            "claimed_but_invalid_staying_inside": sum(a.claimed_but_invalid for a in on),
            "fallbacks": sum(a.inside_fallback for a in on),
            "exact_match_staying_inside": sum(a.middle == r.cut.middle for a, r in zip(on, cases)),
            "exact_match_not_staying_inside": sum(
                b.middle == r.cut.middle for b, r in zip(off, cases)
            ),
            "true_middle_stays_inside": sum(r.true_stays_inside is True for r in cases),
        }

    def names_stats(self) -> dict[str, object] | None:
        """Constrained decoding with knownNames on against off (--names-compare)."""
        if not self.names_compare:
            return None
        cases = [r for r in self.done if r.names]
        out: dict[str, object] = {"cuts": len(cases)}
        for side in ("on", "off"):
            runs = [r.names[side] for r in cases]
            out[side] = {
                "success": sum(x.success for x in runs),
                "exact_match": sum(x.middle == r.cut.middle for x, r in zip(runs, cases)),
                "edit_similarity": _edit_similarity(runs, cases),
                **_undefined_figures(runs),
                "stop_reasons": dict(Counter(x.stop_reason for x in runs).most_common()),
            }
        out["answers_changed"] = sum(r.names["on"].middle != r.names["off"].middle for r in cases)
        return out

    def sweep_stats(self) -> dict[str, object] | None:
        """Per token budget, for each of SWEEP_VARIANTS (--budgets): successes, exact
        matches, witness endings, and the mean length-normalised log-probability."""
        budgets = sorted({b for r in self.done for b in r.sweep})
        if not budgets:
            return None
        cases = [r for r in self.done if r.sweep]

        def per_budget(
            figure: Callable[[list[Run], list[CaseResult]], object],
        ) -> dict[str, list[object]]:
            return {
                variant: [figure([r.sweep[b][variant] for r in cases], cases) for b in budgets]
                for variant in SWEEP_VARIANTS
            }

        return {
            "budgets": budgets,
            "cases": len(cases),
            "success": per_budget(lambda runs, _: sum(x.success for x in runs)),
            "exact_match": per_budget(
                lambda runs, cs: sum(x.middle == r.cut.middle for x, r in zip(runs, cs))
            ),
            "witness_endings": per_budget(lambda runs, _: sum(bool(x.witness) for x in runs)),
            "mean_logprob": per_budget(lambda runs, _: _mean_logprob(runs)),
        }

    def to_dict(self, details: bool = False) -> dict[str, object]:
        out: dict[str, object] = {
            **self._setup(),
            **self._cases(),
            "table": self.table(),
            "modes": list(self.modes),
            **{mode: self._mode(mode) for mode in self.modes},
            **self._timings(),
            "token_healing_compare": self.heal_stats(),
            "stay_inside_compare": self.inside_stats(),
            "known_names_compare": self.names_stats(),
            "budget_sweep": self.sweep_stats(),
            "elapsed_s": round(self.elapsed_s, 1),
        }
        if details:
            out["details"] = [_case_dict(r) for r in self.results]
        return out

    def _setup(self) -> dict[str, object]:
        """What was run: model, target, oracle, corpus, cuts and decoding settings."""
        opts = self.options
        return {
            "model": self.model,
            "model_file": self.model_file,
            "model_family": self.model_family,
            "has_fim": self.has_fim,
            "target": str(self.target),
            "oracle": self.oracle,
            "oracle_version": self.oracle_version,
            "python": ".".join(map(str, sys.version_info[:3])),
            "corpus": self.corpus,
            "cut_kinds": list(self.kinds),
            "n": self.n,
            "seed": self.seed,
            "max_tokens": opts.max_tokens,
            "top_k": opts.top_k,
            "temperature": opts.temperature,
            "token_healing": opts.token_healing,
            "steering": opts.steer,
            "witness_ending": opts.witness_ending,
            "stay_inside": opts.stay_inside,
            "known_names": opts.known_names,
            "further_down": opts.further_down,
        }

    def _cases(self) -> dict[str, object]:
        """How many cuts were completed, of each kind, and the ones that failed."""
        done = self.done
        return {
            "files_used": self.files_used,
            "files_skipped": self.files_skipped,
            "cases": len(done),
            "cases_by_kind": {k: sum(r.cut.kind == k for r in done) for k in self.kinds},
            "errors": [
                {"file": r.cut.file, "where": r.where, "error": r.error}
                for r in self.results
                if r.error is not None
            ],
        }

    def _timings(self) -> dict[str, object]:
        """Parser time per token, quotient and prompt times, and the wall-time ratios."""
        done = self.done
        constrained = [r.runs["constrained"] for r in done]
        unconstrained = [r.runs["unconstrained"] for r in done if "unconstrained" in r.runs]
        parser = [us for run in constrained for us in run.parser_us]
        steer = [us for run in constrained for us in run.steer_us]
        both = [us + steer for run in constrained for us, steer in zip(run.parser_us, run.steer_us)]
        quotient = [q for run in constrained if (q := run.quotient_ms) is not None]
        c_ms, u_ms = (sum(run.total_ms for run in runs) for runs in (constrained, unconstrained))
        c_gen, u_gen = (
            sum(run.generate_ms for run in runs) for runs in (constrained, unconstrained)
        )
        return {
            "parser_samples": len(parser),
            "parser_us_per_token_median": rounded_percentile(parser, 50),
            "parser_us_per_token_p90": rounded_percentile(parser, 90),
            "parser_us_per_token_p99": rounded_percentile(parser, 99),
            "steer_samples": len(steer),
            "steer_us_per_token_median": rounded_percentile(steer, 50),
            "steer_us_per_token_p90": rounded_percentile(steer, 90),
            "steer_us_per_token_p99": rounded_percentile(steer, 99),
            "parser_and_steer_us_per_token_p99": rounded_percentile(both, 99),
            "quotient_ms_median": rounded_percentile(quotient, 50),
            "quotient_ms_p90": rounded_percentile(quotient, 90),
            "prompt_ms_median": rounded_percentile([r.prompt_ms for r in done], 50),
            "prompt_tokens_median": rounded_percentile([float(r.prompt_tokens) for r in done], 50),
            "wall_ratio_constrained_over_unconstrained": _ratio(c_ms, u_ms),
            "generate_ratio_constrained_over_unconstrained": _ratio(c_gen, u_gen),
        }

    @property
    def sound(self) -> bool:
        return not any(
            run.claimed_but_invalid
            for r in self.done
            for run in (r.runs["constrained"], *r.heal.values())
        )

    def summary(self, show: int = 0) -> str:
        d = self.to_dict()
        lines = [
            *self._summary_setup(d),
            "",
            *self._summary_table(),
            "",
            *self._summary_modes(d),
            "",
            *self._summary_timings(d),
        ]
        if show:
            lines += ["", *self._examples(show)]
        return "\n".join(lines)

    def _summary_setup(self, d: dict[str, object]) -> list[str]:
        fim = "FIM prompts" if self.has_fim else "no FIM tokens: prefix-only prompts"
        by_kind = d["cases_by_kind"]
        assert isinstance(by_kind, dict)
        opts = self.options
        return [
            f"FIM quality: model {self.model_file} ({self.model_family}, {fim}), "
            f"target {d['target']}, oracle CPython {self.oracle_version}",
            f"corpus: {self.corpus} ({self.files_used} files used, {self.files_skipped} "
            f"skipped); cuts: {' + '.join(f'{v} {k}' for k, v in by_kind.items())}; "
            f"seed {self.seed}",
            f"max {opts.max_tokens} tokens, top-k {opts.top_k}, temperature {opts.temperature}"
            f", token healing {'on' if opts.token_healing else 'off'}, steering "
            f"{'on' if opts.steer else 'off'}, witness endings "
            f"{'on' if opts.witness_ending else 'off'}, stayInside "
            f"{'on' if opts.stay_inside else 'off'}; {d['elapsed_s']} s",
        ]

    def _summary_table(self) -> list[str]:
        """Table I of the paper."""
        t = self.table()
        if t is None:
            return [f"  (modes run: {', '.join(self.modes)}: no table)"]
        lines = [f"  {'':<34}{'Constrained ✓':>14}{'Constrained ✗':>15}{'Total':>8}"]
        for label, key in (
            ("Unconstrained ✓", "unconstrained_ok"),
            ("Unconstrained ✗", "unconstrained_fail"),
            ("  Checked ✗ (of Unconstrained ✗)", "checked_fail"),
            ("Total", "total"),
        ):
            row = t[key]
            lines.append(
                f"  {label:<34}{row['constrained_ok']:>14}{row['constrained_fail']:>15}"
                f"{row['total']:>8}"
            )
        return lines

    @staticmethod
    def _summary_modes(d: dict[str, object]) -> list[str]:
        lines = []
        for mode in MODES:
            if mode not in d:
                continue
            m = d[mode]
            assert isinstance(m, dict)
            lines.append(
                f"  {mode:<14}{m['success']:>4}/{d['cases']} parse ({m['success_non_empty']} "
                f"non-empty), {m['exact_match']} exact, "
                f"{m['claimed_success_but_invalid']} claimed but invalid, "
                f"{m['success_commenting_out_right']} commenting out R, edit similarity "
                f"{m['edit_similarity']}, undefined names in {m['with_undefined_name']}/"
                f"{m['judged']} ({m['undefined_name_rate']}); "
                f"{m['tokens']} tokens at {m['tokens_per_s']} tok/s; stops {m['stop_reasons']}"
            )
        c = d["constrained"]
        assert isinstance(c, dict)
        lines.append(
            f"  {'':<14}steering in {c['steered_successes']} successes ({c['steered_stops']} "
            f"steered stops), {c['witness_endings']} witness endings, "
            f"{c['model_written_successes']} model-written successes "
            f"({c['forced_successes']} with a forced token), further down in "
            f"{c['rescued_cuts']} cuts ({c['rescued_successes']} successes), "
            f"{c['stay_inside_fallbacks']} stayInside fallbacks, "
            f"{c['restarted_successes']} restarted successes; mean log-probability "
            f"{c['mean_logprob']} per token"
        )
        return lines

    @staticmethod
    def _summary_timings(d: dict[str, object]) -> list[str]:
        def num(key: str, unit: str = "", digits: int = 1) -> str:
            value = d[key]
            return "n/a" if not isinstance(value, float | int) else f"{value:.{digits}f}{unit}"

        lines = [
            f"  parser per token   {num('parser_us_per_token_median')} us median, "
            f"{num('parser_us_per_token_p90')} p90, {num('parser_us_per_token_p99')} p99 "
            f"({d['parser_samples']} tokens); quotient {num('quotient_ms_median')} ms median",
            f"  wall time          constrained / unconstrained = "
            f"{num('wall_ratio_constrained_over_unconstrained', digits=2)} (total_ms, same "
            "cuts); decoding only "
            f"{num('generate_ratio_constrained_over_unconstrained', digits=2)}",
            f"  prompt             {num('prompt_tokens_median', digits=0)} tokens, "
            f"{num('prompt_ms_median')} ms median (evaluated once per cut)",
        ]
        heal = d["token_healing_compare"]
        if isinstance(heal, dict):
            lines.append(
                f"  token healing      boundary cuts {heal['cuts']} ({heal['cursor_in_word']} "
                f"in a word, {heal['healed']} healed): constrained parse "
                f"{heal['constrained_success_with_healing']} with healing, "
                f"{heal['constrained_success_without_healing']} without"
            )
        lines.append(
            f"  steering           {num('steer_us_per_token_median')} us median, "
            f"{num('steer_us_per_token_p99')} p99 per token on top of the parser's; both "
            f"together {num('parser_and_steer_us_per_token_p99')} p99"
        )
        inside = d["stay_inside_compare"]
        if isinstance(inside, dict):
            lines.append(
                f"  stayInside         {inside['cuts']} cuts: answer changed in "
                f"{inside['answers_changed']}; parse {inside['success_staying_inside']} "
                f"staying inside, {inside['success_not_staying_inside']} not; "
                f"{inside['fallbacks']} fallbacks; true middle inside in "
                f"{inside['true_middle_stays_inside']}"
            )
        names = d["known_names_compare"]
        if isinstance(names, dict):
            on, off = names["on"], names["off"]
            assert isinstance(on, dict) and isinstance(off, dict)
            lines.append(
                f"  knownNames         {names['cuts']} cuts: answer changed in "
                f"{names['answers_changed']}; on: {on['exact_match']} exact, edit similarity "
                f"{on['edit_similarity']}, undefined names {on['with_undefined_name']}/"
                f"{on['judged']}; off: {off['exact_match']} exact, edit similarity "
                f"{off['edit_similarity']}, undefined names {off['with_undefined_name']}/"
                f"{off['judged']}"
            )
        sweep = d["budget_sweep"]
        if isinstance(sweep, dict):
            lines.append(f"  budget sweep       {sweep['cases']} cuts, budgets {sweep['budgets']}:")
            for variant, counts in sweep["success"].items():
                lines.append(
                    f"    {variant:<24}success {counts}, exact {sweep['exact_match'][variant]}, "
                    f"mean log-probability {sweep['mean_logprob'][variant]}"
                )
        errors = d["errors"]
        if isinstance(errors, list) and errors:
            lines.append(f"  errors             {len(errors)} cuts: {errors[0]}")
        return lines

    def _examples(self, show: int) -> list[str]:
        lines = [f"examples ({min(show, len(self.done))} of {len(self.done)}):"]
        for r in self.done[:show]:
            lines.append(f"  {r.cut.file}:{r.where} ({r.cut.kind})  true {r.cut.middle!r}")
            for mode, run in r.runs.items():
                mark = "✓" if run.success else "✗"
                lines.append(f"      {mode:<14}{mark} {run.middle!r} ({run.stop_reason})")
        return lines


def _steering_figures(runs: Sequence[Run]) -> dict[str, object]:
    """What steering, witness endings, looking further down and stayInside did."""
    successes = [x for x in runs if x.success]
    return {
        "steered_successes": sum(x.steered > 0 for x in successes),
        "model_written_share": (
            round(sum(_model_written(x) for x in successes) / len(successes), 4)
            if successes
            else None
        ),
        "steered_stops": sum(x.stop_reason == "steered" for x in runs),
        "witness_endings": sum(bool(x.witness) for x in runs),
        "model_written_successes": sum(_model_written(x) for x in successes),
        "forced_successes": sum(x.forced > 0 for x in successes),
        "rescued_cuts": sum(x.rescued > 0 for x in runs),
        "rescued_successes": sum(x.rescued > 0 for x in successes),
        "stay_inside_fallbacks": sum(x.inside_fallback for x in runs),
        "restarted_successes": sum(x.restarted for x in successes),
        "mean_logprob": _mean_logprob(runs),
        "mean_logprob_middles": sum(x.mean_logprob is not None and bool(x.middle) for x in runs),
    }


def _edit_similarity(runs: Sequence[Run], cases: Sequence[CaseResult]) -> float | None:
    """The mean edit similarity of the middles to the true ones."""
    if not runs:
        return None
    total = sum(edit_similarity(x.middle, r.cut.middle) for x, r in zip(runs, cases))
    return round(total / len(runs), 4)


def _undefined_figures(runs: Sequence[Run]) -> dict[str, object]:
    """Of the non-empty middles that parse: how many load a name bound nowhere."""
    judged = [x for x in runs if x.undefined is not None]
    undefined = [x for x in judged if x.undefined]
    return {
        "judged": len(judged),
        "with_undefined_name": len(undefined),
        "undefined_name_rate": round(len(undefined) / len(judged), 4) if judged else None,
        "undefined_names": sorted({name for x in undefined for name in x.undefined or ()}),
    }


def _model_written(run: Run) -> bool:
    """Every token of the middle is one the model ranked among its candidates: no witness
    ending, and no token steering forced (``Completion.forced``)."""
    return not run.witness and not run.forced


def _mean_logprob(runs: Sequence[Run]) -> float | None:
    """The mean, over the non-empty middles returned, of their log-probability per token."""
    scores = [x.mean_logprob for x in runs if x.middle and x.mean_logprob is not None]
    return round(sum(scores) / len(scores), 4) if scores else None


def comments_out_right(left: str, middle: str, right: str, true_middle: str | None = None) -> bool:
    """Whether a comment the middle opened runs on into R's first line, which has text:
    the code after the cursor becomes comment text (by CPython's ``tokenize``).

    Not where R's first line was comment text in the original file, ``left +
    true_middle + right`` (the cut split a comment, which the true middle or the left
    context opened): a middle must open one there.
    """
    if _comment_runs_into_right(left, middle, right):
        return true_middle is None or not _comment_runs_into_right(
            left, true_middle, right, opened_by_middle=False
        )
    return False


def _comment_runs_into_right(
    left: str, middle: str, right: str, *, opened_by_middle: bool = True
) -> bool:
    """``comments_out_right``'s test of one middle: a comment that runs on into R's
    first line (``opened_by_middle``: one that begins in the middle)."""
    if not right.split("\n", 1)[0].strip():
        return False
    whole = left + middle + right

    def row_col(offset: int) -> tuple[int, int]:  # as tokenize counts (lines end at \n)
        return whole.count("\n", 0, offset) + 1, offset - whole.rfind("\n", 0, offset) - 1

    start = row_col(len(left)) if opened_by_middle else (1, 0)
    end = row_col(len(left) + len(middle))
    try:
        for tok in tokenize.generate_tokens(io.StringIO(whole).readline):
            if tok.type != tokenize.COMMENT:
                continue
            if tok.start >= end:
                return False
            if start <= tok.start and tok.end > end:
                return True
    except (tokenize.TokenError, SyntaxError):
        return False
    return False


def _case_dict(r: CaseResult) -> dict[str, object]:
    return {
        "file": r.cut.file,
        "where": r.where,
        "kind": r.cut.kind,
        "offsets": list(r.cut.offsets),
        "true_middle": r.cut.middle,
        "error": r.error,
        "prompt_tokens": r.prompt_tokens,
        "runs": {
            mode: {
                "middle": run.middle,
                "success": run.success,
                "comments_out_right": run.comments_out_right,
                "complete": run.complete,
                "stop_reason": run.stop_reason,
                "tokens": run.tokens,
                "healed": run.healed,
                "total_ms": round(run.total_ms, 1),
                "verdict": run.verdict,
                "steered": run.steered,
                "rescued": run.rescued,
                "forced": run.forced,
                "witness": run.witness,
                "inside_fallback": run.inside_fallback,
                "restarted": run.restarted,
                "mean_logprob": None if run.mean_logprob is None else round(run.mean_logprob, 4),
                "undefined_names": run.undefined,
            }
            for mode, run in r.runs.items()
        },
        "known_names_off": None
        if not r.names
        else {
            "middle": r.names["off"].middle,
            "success": r.names["off"].success,
            "undefined_names": r.names["off"].undefined,
        },
        "stay_inside_off": None
        if not r.inside
        else {"middle": r.inside["off"].middle, "success": r.inside["off"].success},
        "true_stays_inside": r.true_stays_inside,
        "sweep": {
            str(budget): {variant: run.success for variant, run in runs.items()}
            for budget, runs in r.sweep.items()
        },
    }


# --------------------------------------------------------------------------- driver


def _with_text(cuts: Sequence[Cut], corpus: Corpus) -> list[tuple[Cut, str]]:
    """Each cut with its file's text (always found: the cuts come from this corpus)."""
    return [(cut, source.text) for cut in cuts if (source := corpus.by_name(cut.file))]


def run_cuts(
    cuts: Sequence[Cut],
    corpus: Corpus,
    runner: CaseRunner,
    *,
    progress: bool = False,
) -> list[CaseResult]:
    work = _with_text(cuts, corpus)
    return [runner.run(*job) for job in with_progress(work, progress, "cut", _job_file)]


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs to build its own model, oracle and runner."""

    model: str | None
    n_ctx: int
    n_threads: int
    n_gpu_layers: int | None
    oracle: str
    cfg: Config


_worker_runner: CaseRunner | None = None


def _worker_start(spec: WorkerSpec) -> None:
    global _worker_runner
    model = open_model(spec.model, n_ctx=spec.n_ctx, n_threads=spec.n_threads,
                       n_gpu_layers=spec.n_gpu_layers)  # fmt: skip
    QuotientBuilder(spec.cfg.target)  # load the grammar outside the timings
    _worker_runner = CaseRunner(model, Oracle(spec.oracle), spec.cfg)


def _worker_run(job: tuple[Cut, str]) -> CaseResult:
    assert _worker_runner is not None, "worker not started"
    return _worker_runner.run(*job)


def run_cuts_parallel(
    cuts: Sequence[Cut],
    corpus: Corpus,
    spec: WorkerSpec,
    jobs: int,
    *,
    progress: bool = False,
) -> list[CaseResult]:
    """``run_cuts`` over ``jobs`` processes, each with its own model and oracle.

    Results come back in the order of ``cuts``.  Timings are taken while the
    processes share the machine's cores and memory bandwidth.
    """
    work = _with_text(cuts, corpus)
    context = multiprocessing.get_context("spawn")  # llama.cpp and threads: no fork
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start,
                             initargs=(spec,)) as pool:  # fmt: skip
        done = pool.map(_worker_run, work)
        return [result for _, result in zip(with_progress(work, progress, "cut", _job_file), done)]


def _job_file(job: tuple[Cut, str]) -> str:
    return job[0].file


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.fim_quality",
        description="Success of constrained, unconstrained and checked FIM decoding on cuts "
        "of real code.",
    )
    add_corpus_arguments(p, target_help="Python version of the quotient")
    add_decoding_arguments(p)
    _add_run_arguments(p)
    return p


def add_decoding_arguments(p: argparse.ArgumentParser) -> None:
    """The model, the cuts and the decoding settings."""
    p.add_argument(
        "--model",
        default=None,
        metavar="SPEC",
        help="GGUF path, hf://owner/repo/file.gguf or 'default' (the embedded "
        "default model, also when omitted)",
    )
    p.add_argument("--cuts", choices=["boundary", "randspan", "both"], default="both")
    p.add_argument("--n", type=int, default=50, metavar="N", help="cuts of each kind")
    p.add_argument(
        "--cases",
        default="",
        metavar="FILE:LINE:COL,...",
        help="only these of the cuts (file and where, as the report names them)",
    )
    p.add_argument(
        "--failures-from",
        default="",
        metavar="JSON",
        help="instead of making cuts, the cuts whose constrained middle failed in this "
        "report (written with --json --details)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=64, metavar="N")
    p.add_argument("--top-k", type=int, default=50, metavar="K")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument(
        "--no-steering",
        action="store_true",
        help="constrained decoding follows the model to the end of the budget "
        "(see lsp_server/decoding/steering.py)",
    )
    p.add_argument(
        "--witness-ending",
        action="store_true",
        help="a middle the model cannot finish within the budget ends with the shortest "
        "finish the quotient finds",
    )
    p.add_argument(
        "--no-stay-inside",
        action="store_true",
        help="middles may leave the bracket, string or block open at the cursor",
    )
    p.add_argument(
        "--inside-compare",
        action="store_true",
        help="also run constrained decoding with stayInside switched the other way",
    )
    p.add_argument(
        "--no-known-names",
        action="store_true",
        help="constrained middles may load names bound nowhere (knownNames: false)",
    )
    p.add_argument(
        "--names-compare",
        action="store_true",
        help="also run constrained decoding with knownNames switched the other way",
    )
    p.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        default=[],
        metavar="N",
        help="a sweep: success of each mode, and of constrained decoding without "
        "steering, at each of these token budgets",
    )
    p.add_argument(
        "--no-token-healing",
        action="store_true",
        help="do not back the word under the cursor out of the prompt",
    )
    p.add_argument(
        "--heal-compare",
        action="store_true",
        help="also run constrained decoding with token healing switched the other "
        "way on the boundary cuts",
    )


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Where the model runs, and what is printed."""
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--modes",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="the modes each cut runs in (constrained is always one of them)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="worker processes, each with its own model and oracle (default 1); the cuts "
        "and settings are the same for any N",
    )
    p.add_argument("--ctx-size", type=int, default=4096)
    p.add_argument("--gpu-layers", type=int, default=None, help="default: all if supported")
    p.add_argument("--details", action="store_true", help="with --json: every cut's middles")
    p.add_argument(
        "--show", type=int, default=0, metavar="N", help="examples printed in the summary"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


class SetupError(Exception):
    """The corpus, the model or the oracle cannot be had; the message says which."""


def corpus_files(args: argparse.Namespace) -> tuple[list[CorpusFile], str]:
    """The corpus files and the corpus's name for the report."""
    try:
        if args.paths:
            return discover(args.paths), " ".join(args.paths)
        return stdlib_corpus(), str(stdlib_root())
    except FileNotFoundError as exc:
        raise SetupError(f"no such file or directory: {exc}") from exc


def _open(args: argparse.Namespace) -> tuple[FimModel, Oracle]:
    try:
        model = open_model(args.model, n_ctx=args.ctx_size, n_threads=args.threads,
                           n_gpu_layers=args.gpu_layers)  # fmt: skip
    except ModelError as exc:
        raise SetupError(str(exc)) from exc
    try:
        oracle = Oracle(shutil.which(args.oracle) or args.oracle)
    except (OSError, OracleFailure) as exc:
        raise SetupError(f"cannot start oracle {args.oracle!r}: {exc}") from exc
    return model, oracle


def failed_cuts(path: str) -> list[Cut]:
    """The cuts whose constrained middle failed in an earlier ``--json --details`` report
    (the same files, offsets and true middles), in its order."""
    try:
        with open(path, encoding="utf-8") as f:
            details = json.load(f).get("details") or []
    except (OSError, ValueError) as exc:
        raise SetupError(f"cannot read {path}: {exc}") from exc
    if not details:
        raise SetupError(f"{path} has no per-cut details (it needs --json --details)")
    return [
        Cut(d["kind"], d["file"], d["offsets"][0], d["offsets"][1], d["true_middle"])
        for d in details
        if not d["runs"].get("constrained", {}).get("success", True)
    ]


def chosen_cuts(cuts: Sequence[Cut], corpus: Corpus, chosen: str) -> list[Cut]:
    """Those of ``cuts`` named in ``chosen`` (``FILE:LINE:COL,...``, the report's file and
    where: the end of the left context)."""
    wanted = {item.strip() for item in chosen.split(",") if item.strip()}
    picked = []
    for cut in cuts:
        source = corpus.by_name(cut.file)
        if source and f"{cut.file}:{LineIndex(source.text).where(cut.left_end)}" in wanted:
            picked.append(cut)
    return picked


def decode_options(args: argparse.Namespace) -> DecodeOptions:
    return DecodeOptions(
        max_tokens=args.max_tokens,
        top_k=args.top_k,
        temperature=args.temperature,
        seed=args.seed,
        token_healing=not args.no_token_healing,
        steer=not args.no_steering,
        witness_ending=args.witness_ending,
        stay_inside=not args.no_stay_inside,
        known_names=not args.no_known_names,
    )


def _modes(args: argparse.Namespace) -> tuple[Mode, ...]:
    """``--modes`` in the standard order, constrained among them."""
    chosen = {"constrained", *getattr(args, "modes", MODES)}
    return tuple(mode for mode in MODES if mode in chosen)


def _run(
    args: argparse.Namespace, model: FimModel, oracle: Oracle, files: list[CorpusFile], name: str
) -> Report:
    """Make the cuts, complete them (in ``--jobs`` processes) and gather the report."""
    target = TargetVersion.parse(args.target or oracle.version[:2])
    if target != oracle.version[:2]:
        print(f"warning: target {target} but the oracle is {oracle.version_string}: "
              "verdicts may differ", file=sys.stderr)  # fmt: skip
    kinds = CUT_KINDS if args.cuts == "both" else (args.cuts,)
    cfg = Config(decode_options(args), target, heal_compare=args.heal_compare,
                 inside_compare=args.inside_compare, names_compare=args.names_compare,
                 budgets=tuple(args.budgets), modes=_modes(args))  # fmt: skip
    corpus = Corpus(files, oracle)
    if args.failures_from:
        cuts = failed_cuts(args.failures_from)
    else:
        cuts = [cut for kind in kinds for cut in make_cuts(corpus, kind, args.n, args.seed)]
    if args.cases:
        cuts = chosen_cuts(cuts, corpus, args.cases)
    QuotientBuilder(cfg.target)  # load the grammar outside the timings
    progress = not args.no_progress and sys.stderr.isatty()
    if args.jobs > 1:
        spec = WorkerSpec(args.model, args.ctx_size, args.threads, args.gpu_layers,
                          oracle.python, cfg)  # fmt: skip
        results = run_cuts_parallel(cuts, corpus, spec, args.jobs, progress=progress)
    else:
        results = run_cuts(cuts, corpus, CaseRunner(model, oracle, cfg), progress=progress)
    return Report(
        model=args.model or "default",
        model_file=Path(model.path).name,
        model_family=model.layout.family,
        has_fim=model.has_fim,
        target=cfg.target,
        oracle=oracle.python,
        oracle_version=oracle.version_string,
        corpus=name,
        kinds=tuple(kinds),
        n=args.n,
        seed=args.seed,
        options=cfg.options,
        heal_compare=args.heal_compare,
        inside_compare=args.inside_compare,
        names_compare=args.names_compare,
        modes=cfg.modes,
        files_used=corpus.used,
        files_skipped=corpus.skipped,
        results=results,
    )


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    t0 = time.monotonic()
    try:
        files, corpus_name = corpus_files(args)
        model, oracle = _open(args)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with model, oracle:
        try:
            report = _run(args, model, oracle, files, corpus_name)
        except SetupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    report.elapsed_s = time.monotonic() - t0
    if args.json:
        print(json.dumps(report.to_dict(details=args.details), indent=1, ensure_ascii=False),
              file=out)  # fmt: skip
    else:
        print(report.summary(show=args.show), file=out)
    return 0 if report.sound else 1


if __name__ == "__main__":
    sys.exit(main())
