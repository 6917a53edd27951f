"""Every FIM family end to end on its real vocabulary: prompts, decoding and speed.

Usage::

    python -m bench.model_families [PATHS...] [--family NAME ...] [--n N] [--seed S]
        [--max-tokens N] [--target X.Y] [--oracle PYTHON] [--json]

For each family of ``testmodels.tiny_families`` (StarCoder2, Qwen2.5-Coder,
DeepSeek-Coder, CodeLlama, Codestral, Mellum, and Llama 3, Qwen3 and Gemma without FIM
tokens), the tiny random-weight model on the family's real vocabulary (built once into
the cache by ``testmodels.tiny``) completes the same cuts as ``bench.fim_quality``
(``--n`` of each kind, same seed for every family) in the three modes, and the oracle
judges them.  Random weights write nonsense, so the success counts say little about
quality; what the run shows is that every family's prompt layout, end tokens, token
healing and held-back bytes work through the real decoding loop
(``claimed_success_but_invalid`` must be 0: the exit status is 1 otherwise) and what a
large vocabulary costs per token.

Per family: the vocabulary size, the prompt layout fimlsp detected, successes by mode,
``claimed_success_but_invalid``, the parser time per generated token (median, p90,
p99: viability of candidates and completeness checks, see ``bench.fim_quality``), the
time to build the vocabulary's token index (``TokenIndex``, sorting the token bytes)
and to load it from the on-disk cache, and the constrained / unconstrained wall-time
ratio.  Timings are taken with one llama.cpp thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from bench.fim_quality import CaseRunner, Config, Report, run_cuts
from bench.grammar_coverage import (
    Oracle,
    OracleFailure,
    add_corpus_arguments,
    discover,
    stdlib_corpus,
    stdlib_root,
)
from bench.harness import rounded_percentile
from bench.quotient_check import CUT_KINDS, Corpus, make_cuts
from lexer.version import TargetVersion
from lsp_server.decoding import DecodeOptions
from lsp_server.model import FimModel, ModelError
from lsp_server.model.token_index import TokenIndex
from lsp_server.modes import MODES
from quotient_parser.quotient import QuotientBuilder
from testmodels.tiny import fetch_vocabs, tiny_model_cached
from testmodels.tiny_families import FAMILIES


def _index_times(model: FimModel, repeat: int = 3) -> dict[str, float | None]:
    """Milliseconds to build the token index from the vocabulary, and to load it from
    the cache (medians of ``repeat``); leaves the model's own index loaded."""
    vocab = model.vocab_bytes
    built = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        TokenIndex(vocab)
        built.append((time.perf_counter() - t0) * 1e3)
    TokenIndex.cached(vocab)  # written to the cache if it was not there
    loaded = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        TokenIndex.cached(vocab)
        loaded.append((time.perf_counter() - t0) * 1e3)
    _ = model.token_index
    return {
        "index_build_ms": rounded_percentile(built, 50),
        "index_load_ms": rounded_percentile(loaded, 50),
    }


def _detected(model: FimModel) -> dict[str, Any]:
    """What fimlsp detected about the model: family, layout and end tokens."""
    layout = model.layout
    return {
        "detected_family": layout.family,
        "layout": layout.order,
        "add_bos": layout.add_bos,
        "end_tokens": [{"id": t, "text": model.vocab.token_text(t)} for t in sorted(model.eog_ids)],
    }


def run_family(
    name: str, cuts_by_kind: Sequence[Any], corpus: Corpus, oracle: Oracle, cfg: Config, args: Any
) -> dict[str, Any]:
    """One family's row: its model, detection, index times and the cuts' report."""
    fetch_vocabs([FAMILIES[name].vocab])
    path = tiny_model_cached(family=name)
    started = time.monotonic()
    with FimModel(path, n_ctx=args.ctx_size, n_threads=1) as model:
        row: dict[str, Any] = {"family": name, "vocab_size": model.vocab.n_vocab}
        row |= _detected(model)
        row |= _index_times(model)
        results = run_cuts(cuts_by_kind, corpus, CaseRunner(model, oracle, cfg))
        report = Report(
            model=name,
            model_file=path.name,
            model_family=model.layout.family,
            has_fim=model.has_fim,
            target=cfg.target,
            oracle=oracle.python,
            oracle_version=oracle.version_string,
            corpus="",
            kinds=tuple(sorted({c.kind for c in cuts_by_kind})),
            n=args.n,
            seed=args.seed,
            options=cfg.options,
            heal_compare=False,
            results=results,
        )
        full = report.to_dict()
    row["cases"] = full["cases"]
    row["errors"] = full["errors"]
    row["success"] = {mode: full[mode]["success"] for mode in MODES}  # type: ignore[index]
    row["claimed_success_but_invalid"] = full["constrained"]["claimed_success_but_invalid"]  # type: ignore[index]
    row["stop_reasons"] = {mode: full[mode]["stop_reasons"] for mode in MODES}  # type: ignore[index]
    row["tokens"] = {mode: full[mode]["tokens"] for mode in MODES}  # type: ignore[index]
    for key in (
        "parser_samples",
        "parser_us_per_token_median",
        "parser_us_per_token_p90",
        "parser_us_per_token_p99",
        "quotient_ms_median",
        "wall_ratio_constrained_over_unconstrained",
        "generate_ratio_constrained_over_unconstrained",
    ):
        row[key] = full[key]
    row["healed"] = sum(bool(r.runs["constrained"].healed) for r in report.done)
    row["elapsed_s"] = round(time.monotonic() - started, 1)
    return row


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.model_families",
        description="Every FIM family's tiny test model through the decoding benchmark.",
    )
    add_corpus_arguments(p, target_help="Python version of the quotient")
    p.add_argument(
        "--family",
        action="append",
        choices=sorted(FAMILIES),
        default=None,
        help="only this family (repeatable; default: every family)",
    )
    p.add_argument("--n", type=int, default=3, metavar="N", help="cuts of each kind")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=32, metavar="N")
    p.add_argument("--ctx-size", type=int, default=2048)
    return p


def run(args: argparse.Namespace) -> dict[str, Any]:
    files = discover(args.paths) if args.paths else stdlib_corpus()
    started = time.monotonic()
    with Oracle(args.oracle) as oracle:
        target = TargetVersion.parse(args.target or oracle.version[:2])
        corpus = Corpus(files, oracle)
        cuts = [cut for kind in CUT_KINDS for cut in make_cuts(corpus, kind, args.n, args.seed)]
        cfg = Config(DecodeOptions(max_tokens=args.max_tokens, seed=args.seed), target)
        QuotientBuilder(target)  # load the grammar outside the timings
        families = []
        for name in args.family or list(FAMILIES):
            try:
                families.append(run_family(name, cuts, corpus, oracle, cfg, args))
            except ModelError as exc:
                families.append({"family": name, "error": str(exc)})
        oracle_version = oracle.version_string
    return {
        "corpus": " ".join(args.paths) if args.paths else str(stdlib_root()),
        "target": str(target),
        "oracle_version": oracle_version,
        "n": args.n,
        "seed": args.seed,
        "max_tokens": args.max_tokens,
        "cuts": len(cuts),
        "families": families,
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def sound(report: dict[str, Any]) -> bool:
    """No family's constrained decoding claimed a middle the oracle rejects, and every
    family ran."""
    return all(
        "error" not in row and row["claimed_success_but_invalid"] == 0 for row in report["families"]
    )


def summary(report: dict[str, Any]) -> str:
    lines = [
        f"{report['cuts']} cuts (n={report['n']} of each kind, seed {report['seed']}), "
        f"target {report['target']}, max {report['max_tokens']} tokens, "
        f"{report['elapsed_s']} s",
        f"  {'family':<15} {'vocab':>7} {'detected':<10} {'layout':<10} {'ok c/u/k':>9} "
        f"{'bad':>4} {'parser µs med/p90/p99':>24} {'index ms':>9} {'load ms':>8} "
        f"{'wall c/u':>8}",
    ]
    for row in report["families"]:
        if "error" in row:
            lines.append(f"  {row['family']:<15} error: {row['error']}")
            continue
        ok = "/".join(str(row["success"][m]) for m in MODES)
        parser = "/".join(str(row[f"parser_us_per_token_{q}"]) for q in ("median", "p90", "p99"))
        lines.append(
            f"  {row['family']:<15} {row['vocab_size']:>7} {row['detected_family']:<10} "
            f"{row['layout']:<10} {ok:>9} {row['claimed_success_but_invalid']:>4} "
            f"{parser:>24} {row['index_build_ms']!s:>9} {row['index_load_ms']!s:>8} "
            f"{row['wall_ratio_constrained_over_unconstrained']!s:>8}"
        )
    lines.append("  (ok c/u/k: successes constrained / unconstrained / checked; "
                 "bad: constrained claimed success but invalid)")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    try:
        report = run(args)
    except OracleFailure as exc:
        print(f"bench.model_families: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False), file=out)
    else:
        print(summary(report), file=out)
    return 0 if sound(report) else 1


if __name__ == "__main__":
    sys.exit(main())
