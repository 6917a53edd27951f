"""The ``fimlsp`` command line.

``fimlsp check FILE...`` tells, for each file, whether it is a valid module
for the target Python version and, if not, where the text stops being a
viable prefix.  The language server and completion commands join this entry
point as they land.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .recognizer import Recognizer, SourceDecodeError, decode_source


def _first_dead_line(rec: Recognizer, text: str) -> int | None:
    """1-based line where the text stops being a viable prefix, if it does."""
    state = rec.initial()
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        state = state.feed(line)
        if not state.viable:
            return number
    return None


def _check(args: argparse.Namespace) -> int:
    rec = Recognizer(args.target)
    results = []
    for name in args.files:
        path = Path(name)
        entry: dict[str, object] = {"file": name}
        try:
            text = decode_source(path.read_bytes())
        except OSError as exc:
            entry.update(valid=False, error=f"cannot read file: {exc.strerror}")
        except SourceDecodeError as exc:
            entry.update(valid=False, error=str(exc))
        else:
            state = rec.initial().feed(text)
            entry["valid"] = state.complete
            if not state.complete:
                entry["error"] = state.why_not_complete()
                entry["line"] = _first_dead_line(rec, text)
        results.append(entry)
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    else:
        for entry in results:
            if entry["valid"]:
                print(f"{entry['file']}: valid Python {args.target}")
            else:
                where = f" (line {entry['line']})" if entry.get("line") else ""
                print(f"{entry['file']}: invalid{where}: {entry['error']}")
    return 0 if all(e["valid"] for e in results) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fimlsp", description="Syntax-guaranteed fill-in-the-middle completion for Python."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser(
        "check", help="check whether files are valid Python for a target version"
    )
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--target", default="3.13", help="target Python version (3.8 to 3.13)")
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(func=_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ValueError as exc:  # bad --target and similar
        print(f"fimlsp: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
