"""Compare the lexer with CPython's ``tokenize`` over a standard library.

Usage::

    python -m bench.tokenize_check [--python PATH] [--target 3.12] [--limit N] [FILE ...]

The oracle interpreter (``--python``, default: this one) tokenizes every
``.py`` file under its own standard library (or the files given) once, in a
subprocess; files that it both tokenizes and ``ast.parse``-s are lexed here
for the oracle's version (or ``--target``) and the symbol streams compared as
``(kind, text)`` pairs.  The oracle's tokens are mapped to symbol kinds: OP to
its string, NAME to the keyword if it is one, STRING to STRING or BYTES; NL,
COMMENT and ENCODING are dropped, as are the empty FSTRING_MIDDLE tokens of
3.12+, and consecutive FSTRING_MIDDLEs are joined (CPython splits them at
``{{``/``}}``, which it shows as one brace).  Oracles before 3.12 see an
f-string as one STRING token, so our FSTRING_START .. FSTRING_END runs are
joined into one STRING for them.  INDENT/DEDENT/ENDMARKER texts are not
compared.

Prints each mismatch and a summary; exits with status 1 if any file differs.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from bench.oracle import pyenv_interpreter
from lexer import LexError, LexState, Symbol

Pair = tuple[str, str]

#: Literal pieces of f-strings and t-strings, compared joined (see above).
_MIDDLES = ("FSTRING_MIDDLE", "TSTRING_MIDDLE")

#: Runs inside the oracle interpreter (any version from 3.8): reads file
#: paths as JSON lines on stdin, writes one JSON line per file.
_WORKER = r"""
import ast, io, json, keyword, sys, tokenize, warnings
warnings.simplefilter("ignore")
KW = set(keyword.kwlist)
SKIP = {tokenize.NL, tokenize.COMMENT, tokenize.ENCODING}

def kind_of(tok):
    if tok.type == tokenize.OP:
        return tok.string
    if tok.type == tokenize.NAME:
        return tok.string if tok.string in KW else "NAME"
    if tok.type == tokenize.STRING:
        s = tok.string
        k = min(i for i in (s.find("'"), s.find('"')) if i >= 0)
        return "BYTES" if "b" in s[:k].lower() else "STRING"
    return tokenize.tok_name[tok.type]

def decode(data):
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(enc)
    return text[1:] if text.startswith("\ufeff") else text

print(json.dumps({"version": list(sys.version_info[:2]),
                  "stdlib": __import__("sysconfig").get_paths()["stdlib"]}), flush=True)
for line in sys.stdin:
    path = json.loads(line)
    result = {"path": path, "parsed": False, "tokens": None}
    try:
        with open(path, "rb") as f:
            text = decode(f.read())
    except Exception as exc:
        result["error"] = "decode: %s" % exc
        print(json.dumps(result), flush=True)
        continue
    try:
        ast.parse(text)
        result["parsed"] = True
    except Exception as exc:
        result["error"] = "parse: %s" % exc
    try:
        result["tokens"] = [[kind_of(t), t.string] for t in
                            tokenize.generate_tokens(io.StringIO(text).readline)
                            if t.type not in SKIP]
    except Exception as exc:
        result["error"] = "tokenize: %s" % exc
    print(json.dumps(result), flush=True)
"""


@dataclass
class Result:
    """Outcome for one file: ``status`` is 'ok', 'mismatch', 'lexerror' or 'skipped'."""

    path: str
    status: str
    detail: str = ""


def decode_file(path: str) -> str:
    """Decode a source file as CPython does (BOM, coding cookie, UTF-8)."""
    with open(path, "rb") as f:
        data = f.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def lex_text(text: str, target: tuple[int, int]) -> list[Symbol]:
    """All symbols of ``text`` fed as one chunk."""
    state, symbols = LexState.initial(target=target).feed(text)
    return symbols + state.finish()


def normalize_ours(symbols: Iterable[Symbol], text: str, fstring_tokens: bool) -> list[Pair]:
    """Our symbols as comparable (kind, text) pairs (see the module docstring)."""
    out: list[Pair] = []
    depth = 0
    fstart = 0
    for kind, sym_text, start in symbols:
        if not fstring_tokens:
            if kind == "FSTRING_START":
                if depth == 0:
                    fstart = start
                depth += 1
                continue
            if kind == "FSTRING_END":
                depth -= 1
                if depth == 0:
                    out.append(("STRING", text[fstart : start + len(sym_text)]))
                continue
            if depth:
                continue
        if kind in ("INDENT", "DEDENT", "ENDMARKER"):
            sym_text = ""
        elif kind in _MIDDLES:
            sym_text = sym_text.replace("{{", "{").replace("}}", "}")
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + sym_text)
                continue
        out.append((kind, sym_text))
    return out


def normalize_oracle(tokens: Iterable[list[str]]) -> list[Pair]:
    """The oracle's tokens as comparable (kind, text) pairs."""
    out: list[Pair] = []
    for kind, text in tokens:
        if kind in ("INDENT", "DEDENT", "ENDMARKER"):
            text = ""
        elif kind in _MIDDLES:
            if not text:
                continue
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + text)
                continue
        out.append((kind, text))
    return out


def first_difference(ours: list[Pair], theirs: list[Pair]) -> str:
    """A short description of where two streams first differ."""
    k = 0
    while k < len(ours) and k < len(theirs) and ours[k] == theirs[k]:
        k += 1
    return (
        f"at symbol {k}: ours {ours[k : k + 4]!r} vs oracle {theirs[k : k + 4]!r} "
        f"(after {ours[max(0, k - 3) : k]!r})"
    )


class Oracle:
    """A running oracle interpreter (one subprocess for many files)."""

    def __init__(self, python: str) -> None:
        fd, self._script = tempfile.mkstemp(suffix="_lexer_oracle.py")
        with os.fdopen(fd, "w") as f:
            f.write(_WORKER)
        self._proc = subprocess.Popen(
            [python, "-X", "utf8", self._script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        assert self._proc.stdout is not None
        head = json.loads(self._proc.stdout.readline())
        major, minor = head["version"][:2]
        self.version: tuple[int, int] = (int(major), int(minor))
        self.stdlib: str = head["stdlib"]

    def tokenize(self, paths: list[str]) -> Iterator[dict[str, object]]:
        """Oracle results for ``paths``, in order."""
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        # Feed the paths from a thread-free loop: write all, then read all.
        # Results are small per line, but the pipe may fill, so interleave.
        pending = 0
        it = iter(paths)
        done = False
        while True:
            while not done and pending < 16:
                try:
                    path = next(it)
                except StopIteration:
                    done = True
                    proc.stdin.close()
                    break
                proc.stdin.write(json.dumps(path) + "\n")
                proc.stdin.flush()
                pending += 1
            if pending == 0:
                break
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("oracle interpreter died")
            pending -= 1
            yield json.loads(line)

    def close(self) -> None:
        try:
            if self._proc.stdin is not None and not self._proc.stdin.closed:
                self._proc.stdin.close()
            self._proc.wait(timeout=30)
        finally:
            os.unlink(self._script)


def find_interpreter(version: tuple[int, int]) -> str | None:
    """A pyenv interpreter for ``version`` (``$PYENV_ROOT``, default ``~/.pyenv``), if any."""
    return pyenv_interpreter(f"{version[0]}.{version[1]}")


def stdlib_files(root: str) -> list[str]:
    """Every .py file under ``root`` (sorted), skipping site-packages."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "site-packages")
        found.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return found


def compare(
    python: str,
    files: list[str] | None = None,
    target: tuple[int, int] | None = None,
    limit: int | None = None,
) -> Iterator[Result]:
    """Compare our symbols with the oracle's tokens for each file."""
    oracle = Oracle(python)
    try:
        paths = files if files else stdlib_files(oracle.stdlib)
        if limit is not None:
            paths = paths[:limit]
        version = target or oracle.version
        fstring_tokens = oracle.version >= (3, 12)
        for result in oracle.tokenize(paths):
            path = str(result["path"])
            tokens = result.get("tokens")
            if not result.get("parsed") or tokens is None:
                yield Result(path, "skipped", str(result.get("error", "")))
                continue
            text = decode_file(path)
            try:
                symbols = lex_text(text, version)
            except LexError as exc:
                yield Result(path, "lexerror", str(exc))
                continue
            ours = normalize_ours(symbols, text, fstring_tokens)
            theirs = normalize_oracle(tokens)  # type: ignore[arg-type]
            if ours != theirs:
                yield Result(path, "mismatch", first_difference(ours, theirs))
            else:
                yield Result(path, "ok")
    finally:
        oracle.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tokenize_check", description=__doc__)
    parser.add_argument("--python", default=sys.executable, help="oracle interpreter")
    parser.add_argument("--target", help="target version for our lexer, e.g. 3.12")
    parser.add_argument("--limit", type=int, help="compare only the first N files")
    parser.add_argument("files", nargs="*", help="files to compare (default: the stdlib)")
    args = parser.parse_args(argv)
    target = None
    if args.target:
        major, minor = args.target.split(".")[:2]
        target = (int(major), int(minor))
    counts: dict[str, int] = {}
    for result in compare(args.python, args.files or None, target, args.limit):
        counts[result.status] = counts.get(result.status, 0) + 1
        if result.status in ("mismatch", "lexerror"):
            print(f"{result.status.upper()} {result.path}: {result.detail}")
    summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    bad = counts.get("mismatch", 0) + counts.get("lexerror", 0)
    print(f"{summary}; mismatches={bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
