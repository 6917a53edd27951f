"""The parser's time per token on real middles, replayed without the model that wrote them.

Usage::

    python -m bench.gpu.parser_replay [--middles .gpu_payload/middles.json.xz]
        [--model VOCAB.gguf] [--limit N] [--repeat R] [--json]

On a GPU a token takes a few milliseconds, so whether constrained decoding is free
depends on the parser's time per token beside it; random-weight models write random
middles, which ask the parser other questions than real ones.  This replays the
recording of ``bench.gpu.middles`` (the real Qwen2.5-Coder 0.5B on cuts of the standard
library): ``generate`` runs on every cut with :class:`~bench.gpu.middles.ReplayBackend`,
which answers each ranking as the real model did, so the decoding loop tries the same
candidates against the quotient, in the same order, as it did with the model.  The
parser time per token is the loop's own figure (``Completion.parser_us``: viability of
each candidate tried, completeness checks), as ``bench.fim_quality`` reports it.

The vocabulary (token bytes, end tokens, tokenizer) comes from ``--model``, any GGUF with
Qwen2.5-Coder's tokenizer; by default the ``tiny`` random-weight model of
``bench.gpu.models`` is built for it (a few seconds).  The report says how many replayed
middles equal the recorded ones and how many answers the recording lacked (0: the same
path exactly); a difference means the decoder changed since the recording.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.gpu.middles import RecordedCut, ReplayBackend, load_recording
from bench.gpu.pack import MIDDLES_FILE, PAYLOAD
from bench.harness import rounded_percentile
from lexer.version import TargetVersion
from lsp_server.decoding import generate
from lsp_server.model import FimModel
from quotient_parser.quotient import QuotientBuilder
from quotient_parser.yields import yield_tables

__all__ = ["replay"]


def _warm(target: TargetVersion) -> None:
    """The grammar and the distance's tables built before the timings, as a running
    server has them (``bench.fim_quality`` does the same)."""
    recognizer = QuotientBuilder(target).recognizer
    yield_tables(recognizer.grammar, recognizer.automaton).warm_up()


def replay(vocab: FimModel, cuts: Sequence[RecordedCut], repeat: int = 1) -> dict[str, Any]:
    """Replay every cut ``repeat`` times; the parser's figures and the replay's fidelity."""
    parser: list[float] = []
    steer: list[float] = []
    quotient_ms: list[float] = []
    same = diverged = missing = 0
    per_cut = []
    for target in sorted({c.target for c in cuts}):
        _warm(TargetVersion.parse(target))
    for _ in range(repeat):
        for cut in cuts:
            backend = ReplayBackend(vocab, cut.generations)
            done = generate(
                backend, cut.left, cut.right, cut.options(), target=TargetVersion.parse(cut.target)
            )
            parser += done.parser_us
            steer += done.steer_us
            times = done.times
            if times.quotient_built is not None:
                quotient_ms.append((times.quotient_built - times.started) * 1e3)
            same += done.middle == cut.middle
            diverged += backend.divergence.total > 0
            missing += backend.divergence.missing_answers
            per_cut.append(
                {
                    "where": f"{cut.file}:{cut.where}",
                    "tokens": done.tokens,
                    "same_middle": done.middle == cut.middle,
                    "divergence": asdict(backend.divergence),
                    "parser_us_sum": round(sum(done.parser_us), 1),
                }
            )
    recorded = [us for c in cuts for us in c.parser_us]
    return {
        "cuts": len(cuts),
        "repeat": repeat,
        "tokens": len(parser),
        "parser_us_per_token_median": rounded_percentile(parser, 50),
        "parser_us_per_token_p90": rounded_percentile(parser, 90),
        "parser_us_per_token_p99": rounded_percentile(parser, 99),
        "parser_us_per_token_max": rounded_percentile(parser, 100),
        "steer_us_per_token_median": rounded_percentile(steer, 50),
        "steer_us_per_token_p99": rounded_percentile(steer, 99),
        "quotient_ms_median": rounded_percentile(quotient_ms, 50),
        "quotient_ms_p90": rounded_percentile(quotient_ms, 90),
        "same_middle": same,
        "diverged_cuts": diverged,
        "missing_answers": missing,
        "recorded_parser_us_per_token_median": rounded_percentile(recorded, 50),
        "recorded_parser_us_per_token_p99": rounded_percentile(recorded, 99),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "per_cut": per_cut,
    }


def summary(r: dict[str, Any], about: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"parser replay: {r['cuts']} real middles of {about.get('model_file', '?')} "
            f"x{r['repeat']}, {r['tokens']} tokens (Python {r['python']})",
            f"  parser us/token median {r['parser_us_per_token_median']}, "
            f"p90 {r['parser_us_per_token_p90']}, p99 {r['parser_us_per_token_p99']}, "
            f"max {r['parser_us_per_token_max']}",
            f"  steering us/token median {r['steer_us_per_token_median']}, p99 "
            f"{r['steer_us_per_token_p99']}; quotient build ms median "
            f"{r['quotient_ms_median']}, p90 {r['quotient_ms_p90']}",
            f"  same middle as recorded {r['same_middle']}/{r['cuts'] * r['repeat']}; "
            f"cuts that diverged {r['diverged_cuts']} ({r['missing_answers']} answers "
            f"missing); recorded on the CPU: median {r['recorded_parser_us_per_token_median']}"
            f", p99 {r['recorded_parser_us_per_token_p99']} us/token",
        ]
    )


def _vocab_model(path: Path | None, tmp: Path) -> Path:
    if path is not None:
        return path
    from bench.gpu.models import build_model

    return build_model("tiny", tmp / "tiny.gguf")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.gpu.parser_replay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--middles", type=Path, default=PAYLOAD / MIDDLES_FILE)
    p.add_argument("--model", type=Path, default=None, help="a GGUF with the same tokenizer")
    p.add_argument("--limit", type=int, default=0, help="only the first N cuts")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    about, cuts = load_recording(args.middles)
    if args.limit:
        cuts = cuts[: args.limit]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        path = _vocab_model(args.model, Path(tmp))
        with FimModel(path, n_ctx=256, n_threads=1, n_gpu_layers=0) as vocab:
            report = replay(vocab, cuts, args.repeat)
    report["recording"] = {k: v for k, v in about.items()}
    report["elapsed_s"] = round(time.monotonic() - t0, 1)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(summary(report, about))
    return 0


if __name__ == "__main__":
    sys.exit(main())
