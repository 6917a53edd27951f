"""Where the parser's time per token goes, per family: ``bench.model_families`` with the
decoder's parser time split by what it was spent on.

Usage::

    python -m bench.parser_split [bench.model_families arguments] [--json]

The parser time of a step (``Completion.parser_us``, what ``bench.model_families`` and
``bench.fim_quality`` report) is the sum of three parts, timed here by wrapping the
decoder's methods (the decoding itself is unchanged):

``stop``        the stopping-point check at the start of the step (is the middle so far
                complete?  Usually answered already, see ``ahead``);
``candidates``  the candidates tried: ``state.feed(text).viable`` per candidate, the
                end tokens' completeness checks, the look further down the ranking;
``ahead``       the completeness check of the middle just extended, made at the end of
                the step while the parser's tables are still in the processor's caches
                (``Decoder._check_next_stop``).

Per family: the medians and p90s of the parts and of the whole, and the median number of
candidates tried per step.  The wrapping costs a little time of its own, so the totals run
somewhat above ``bench.model_families``'s.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from bench import model_families
from bench.harness import rounded_percentile
from lsp_server.decoding.loop import Decoder

PARTS = ("stop", "candidates", "ahead")


class _Recorder:
    """Wraps the decoder's timed methods; one row of part timings per constrained step."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []
        self.family = ""
        self.by_family: dict[str, list[dict[str, float]]] = {}
        self._step: dict[str, float] = {}
        self._saved: dict[str, Callable[..., Any]] = {}

    def _timed(self, name: str, part: str) -> None:
        original = getattr(Decoder, name, None)
        if original is None:  # a decoder from before this part was split off
            return
        self._saved[name] = original
        step = self._step

        def wrapper(decoder: Decoder, *args: Any) -> Any:
            before = decoder._parser_ns
            result = original(decoder, *args)
            step[part] = step.get(part, 0.0) + (decoder._parser_ns - before) / 1e3
            return result

        setattr(Decoder, name, wrapper)

    def __enter__(self) -> _Recorder:
        self._timed("_note_stopping_point", "stop")
        self._timed("_first_viable", "candidates")
        self._timed("_check_next_stop", "ahead")
        choose, text_of, step = Decoder._choose, Decoder.text_of, self._step
        self._saved["_choose"], self._saved["text_of"] = choose, text_of
        recorder = self

        def counting(decoder: Decoder, token: int) -> Any:
            step["tried"] = step.get("tried", 0) + 1
            return text_of(decoder, token)

        def choosing(decoder: Decoder, ranking: Any) -> Any:
            step.clear()
            result = choose(decoder, ranking)
            if decoder.constrained:
                row = {part: step.get(part, 0.0) for part in (*PARTS, "tried")}
                row["total"] = decoder.parser_us[-1]
                recorder.by_family.setdefault(recorder.family, []).append(row)
            return result

        for name, wrapper in (("text_of", counting), ("_choose", choosing)):
            setattr(Decoder, name, wrapper)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._saved.items():
            setattr(Decoder, name, original)


def split(argv: Sequence[str]) -> dict[str, Any]:
    """Run ``bench.model_families`` with ``argv``; its report with each family's split."""
    families = list(model_families.FAMILIES)
    chosen = [argv[i + 1] for i, a in enumerate(argv) if a == "--family"] or families
    report: dict[str, Any] = {"families": []}
    with _Recorder() as recorder:
        for name in chosen:
            recorder.family = name
            rest = [
                a for i, a in enumerate(argv) if a != "--family" and argv[i - 1 : i] != ["--family"]
            ]
            out = io.StringIO()
            model_families.main([*rest, "--family", name, "--json"], out)
            row = json.loads(out.getvalue())
            report |= {k: v for k, v in row.items() if k != "families"}
            steps = recorder.by_family.get(name, [])
            entry: dict[str, Any] = {"family": name, "steps": len(steps)}
            for part in (*PARTS, "total"):
                values = [s[part] for s in steps]
                entry[f"{part}_us_median"] = rounded_percentile(values, 50)
                entry[f"{part}_us_p90"] = rounded_percentile(values, 90)
            entry["tried_median"] = rounded_percentile([s["tried"] for s in steps], 50)
            report["families"].append(entry)
    return report


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    out = out or sys.stdout
    report = split(args)
    if as_json:
        print(json.dumps(report, indent=1), file=out)
        return 0
    heads = " ".join(f"{p + ' med/p90':>18}" for p in (*PARTS, "total"))
    print(f"{'family':<15} {'steps':>5} {heads} {'tried':>6}", file=out)
    for row in report["families"]:
        cells = " ".join(
            f"{str(row[f'{p}_us_median']) + '/' + str(row[f'{p}_us_p90']):>18}"
            for p in (*PARTS, "total")
        )
        print(f"{row['family']:<15} {row['steps']:>5} {cells} {row['tried_median']!s:>6}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
