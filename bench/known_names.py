"""knownNames against the truth: does the guard ever refuse the middle a file really has?

Random spans (1 to ``--span`` characters) of the standard library's modules are cut out
and their true middle fed to the guard (``lsp_server/names``) a few characters at a time,
then checked where it ends.  A refusal is a false positive (the check must never refuse
code that runs); files the check is off for (a star import, ``exec``, ...) are counted
apart.  Also the time the analysis of L and R takes, per cut (median and p90).

    python -m bench.known_names [--files N] [--cuts N] [--span N] [--seed S] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.harness import rounded_percentile
from lsp_server.names import NameGuard, known_names

__all__ = ["main"]

#: Characters fed to the guard at a time (about a token's worth).
CHUNK = 3


def refusal(left: str, middle: str, right: str, target: str) -> tuple[str | None, str | None]:
    """(why the check is off, or None; the prefix of ``middle`` refused, "<end>" where only
    its end is, or None)."""
    known = known_names(left, right, target)
    if known.disabled is not None:
        return known.disabled, None
    guard = NameGuard.start(known, right)
    for end in range(CHUNK, len(middle) + CHUNK, CHUNK):
        guard = guard.feed(middle[end - CHUNK : end])
        if not guard.ok:
            return None, middle[:end]
    return None, None if guard.ends_ok else "<end>"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.known_names", description=__doc__)
    p.add_argument("--files", type=int, default=120, help="modules of the standard library")
    p.add_argument("--cuts", type=int, default=4, help="cuts per module")
    p.add_argument("--span", type=int, default=120, help="longest middle (characters)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-chars", type=int, default=150_000, help="larger modules are skipped")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    target = f"{sys.version_info[0]}.{sys.version_info[1]}"
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[: args.files]
    rng = random.Random(args.seed)
    checked, off, analysis_ms = 0, Counter[str](), []
    refused: list[dict[str, object]] = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) > args.max_chars or not text:
            continue
        for _ in range(args.cuts):
            start = rng.randrange(len(text))
            end = min(len(text), start + rng.randrange(1, args.span))
            left, middle, right = text[:start], text[start:end], text[end:]
            t0 = time.perf_counter()
            why, at = refusal(left, middle, right, target)
            analysis_ms.append((time.perf_counter() - t0) * 1e3)
            if why is not None:
                off[why.split(" ")[0]] += 1
                continue
            checked += 1
            if at is not None:
                refused.append({"file": path.name, "offset": start, "middle": middle, "at": at})
    report = {
        "target": target,
        "seed": args.seed,
        "cuts_checked": checked,
        "cuts_off": sum(off.values()),
        "off_because": dict(off.most_common()),
        "false_refusals": len(refused),
        "refused": refused,
        "check_ms_median": rounded_percentile(analysis_ms, 50),
        "check_ms_p90": rounded_percentile(analysis_ms, 90),
    }
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(
            f"{checked} cuts checked ({report['cuts_off']} off: {report['off_because']}), "
            f"{len(refused)} true middles refused; analysis and check "
            f"{report['check_ms_median']} ms median, {report['check_ms_p90']} ms p90"
        )
        for item in refused[:20]:
            print(f"  {item['file']}:{item['offset']} {item['middle']!r} refused at {item['at']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
