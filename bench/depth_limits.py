"""CPython's depth limits per version, next to fimlsp's verdicts on the same texts.

CPython refuses some texts that its grammar derives, at limits of its implementation:
the tokenizer's 100 indentation levels and 200 nested brackets (SyntaxErrors, which
fimlsp's lexer matches), 3.8's parser stack (a MemoryError at about 98 nested
brackets, which fimlsp's lexer matches for brackets around an expression at the top
level, and not its other uses), and the recursion depth of the parser and of AST
construction (a ``RecursionError``, or a crash of the C stack in 3.8-3.10), which
fimlsp does not model (docs/architecture.md, "CPython's implementation limits").
For each construct and each pyenv interpreter this finds the largest size
``ast.parse`` accepts (a bisection in a child process, so a crash costs one
verdict), then asks fimlsp's recognizer about sizes around it.

    python -m bench.depth_limits --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

from bench.oracle import pyenv_interpreter
from quotient_parser.recognizer import Recognizer

__all__ = ["CONSTRUCTS", "build_text", "measure"]

#: name -> (a Python expression of ``n`` that builds the text, the largest size tried)
CONSTRUCTS: dict[str, tuple[str, int]] = {
    "binary chain 1 + 1 + ... + 1": ('" + ".join(["1"] * n)', 100_000),
    "unary chain - - ... 1": ('"- " * n + "1"', 100_000),
    "attribute chain a.a.a...": ('"a" + ".a" * n', 100_000),
    "power chain 1 ** 1 ** ... 1": ('" ** ".join(["1"] * n)', 100_000),
    "nested brackets (((...)))": ('"(" * n + ")" * n', 2_000),
    "brackets around an expression ((1))": ('"(" * n + "1" + ")" * n', 2_000),
    "nested calls f(f(...))": ('"f(" * n + ")" * n', 2_000),
    "nested blocks if 1:": (
        '"".join(" " * i + "if 1:\\n" for i in range(n)) + " " * n + "pass\\n"',
        400,
    ),
}

#: Run by each interpreter: the largest n in [0, hi] whose text ``ast.parse`` accepts.
_BISECT = """
import ast, sys
build, hi = sys.argv[1], int(sys.argv[2])
def ok(n):
    try:
        ast.parse(eval(build, {"n": n}))
        return True
    except (SyntaxError, RecursionError, MemoryError):
        return False
if ok(hi):
    print(hi)
else:
    lo = 0
    while lo < hi - 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    print(lo)
"""


def build_text(construct: str, n: int) -> str:
    return str(eval(CONSTRUCTS[construct][0], {"n": n}))  # our own expressions above


def _largest_accepted(python: str, build: str, hi: int) -> int | str:
    """The bisection in a child; a crash (the C stack) retries below the crashing size."""
    while hi > 0:
        run = subprocess.run(
            [python, "-c", _BISECT, build, str(hi)], capture_output=True, text=True, timeout=600
        )
        if run.returncode == 0:
            return int(run.stdout.split()[-1])
        hi //= 2  # a probe crashed the interpreter: look lower
    return "crash"


def measure(versions: list[str]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for version in versions:
        python = pyenv_interpreter(version)
        if python is None:
            continue
        recognizer = Recognizer(version)
        row: dict[str, Any] = {}
        for construct, (build, hi) in CONSTRUCTS.items():
            largest = _largest_accepted(python, build, hi)
            fimlsp = {}
            if isinstance(largest, int) and largest < hi:
                for n in (largest, largest + 1, 2 * largest + 1):
                    fimlsp[n] = recognizer.recognize(build_text(construct, n))
            row[construct] = {"cpython_largest": largest, "tried_up_to": hi, "fimlsp": fimlsp}
        rows[version] = row
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.depth_limits", description=__doc__)
    p.add_argument("--versions", default="3.8,3.9,3.10,3.11,3.12,3.13")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    rows = measure(args.versions.split(","))
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return
    for version, row in rows.items():
        print(version)
        for construct, found in row.items():
            verdicts = ", ".join(
                f"{n}: {'accepts' if ok else 'refuses'}" for n, ok in found["fimlsp"].items()
            )
            print(
                f"  {construct:32} CPython accepts up to {found['cpython_largest']}"
                f" (tried to {found['tried_up_to']}); fimlsp {verdicts or '-'}"
            )


if __name__ == "__main__":
    main()
