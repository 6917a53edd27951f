"""Random one-token and one-character edits of valid source (mutants).

A mutant is judged by the oracle and by the recognizer; the mutation
tokens cover every keyword, soft keyword, operator and literal kind of the
supported targets (3.8 to 3.15: t-strings and ``lazy`` included), so that a
grammar rule missing or too loose shows up as a disagreement.
"""

from __future__ import annotations

import io
import random
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from bench.corpus import LineIndex

__all__ = [
    "MUTATION_CHARS",
    "MUTATION_TOKENS",
    "Mutant",
    "make_mutant",
    "make_mutants",
    "token_spans",
]

# Tokens (and a few fragments) inserted or substituted by token-level mutations.
MUTATION_TOKENS: tuple[str, ...] = (
    # keywords and soft keywords
    "if", "else", "elif", "for", "while", "in", "not", "and", "or", "is", "def",
    "class", "return", "yield", "lambda", "import", "from", "as", "with", "try",
    "except", "finally", "raise", "pass", "break", "continue", "global",
    "nonlocal", "del", "assert", "async", "await", "None", "True", "False",
    "match", "case", "type", "_", "lazy",
    # operators and delimiters
    "(", ")", "[", "]", "{", "}", ":", ",", ".", ";", "=", "==", "!=", "<", ">",
    "<=", ">=", "+", "-", "*", "**", "/", "//", "%", "@", "|", "&", "^", "~",
    "<<", ">>", "->", ":=", "+=", "-=", "*=", "...", "!",
    # atoms
    "x", "self", "0", "1", "1.5", "0x1f", "1j", "''", '""', "'''s'''", "b''",
    "f'{x}'", "r'\\d'", "t'{x}'", "!r",
    # layout
    "\n", "\\\n", "    ", "\t", "#",
)  # fmt: skip

# Characters inserted or substituted by character-level mutations.
MUTATION_CHARS = "()[]{}:;,.=+-*/%@<>!~^&|\\'\"#\n\t x0_t"

_IDENT_CHAR = re.compile(r"\w")


@dataclass(frozen=True)
class Mutant:
    text: str
    offset: int  # first character that differs from the original
    description: str


def token_spans(text: str) -> list[tuple[int, int]]:
    """Non-empty token spans (start, end) found by the running interpreter's
    ``tokenize`` (up to the first tokenizer error, if any)."""
    starts = [0]
    for line in io.StringIO(text).readlines():  # the same split as tokenize's readline
        starts.append(starts[-1] + len(line))
    spans: list[tuple[int, int]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.ENDMARKER:
                break
            (r0, c0), (r1, c1) = tok.start, tok.end
            if r0 - 1 >= len(starts) or r1 - 1 >= len(starts):
                continue
            s, e = starts[r0 - 1] + c0, starts[r1 - 1] + c1
            if 0 <= s < e <= len(text):
                spans.append((s, e))
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return spans


def _pad(text: str, start: int, end: int, new: str) -> str:
    """``new`` with spaces so that it does not fuse with the neighbouring words."""
    if not new:
        return new
    if start > 0 and _IDENT_CHAR.match(text[start - 1]) and _IDENT_CHAR.match(new[0]):
        new = " " + new
    if end < len(text) and _IDENT_CHAR.match(text[end]) and _IDENT_CHAR.match(new[-1]):
        new = new + " "
    return new


def make_mutant(text: str, rng: random.Random, spans: Sequence[tuple[int, int]]) -> Mutant:
    """One random mutant of ``text`` (never equal to it)."""
    index = LineIndex(text)
    for _ in range(100):
        ops = ["char-insert"]
        if text:
            ops += ["char-delete", "char-replace"]
        if spans:
            ops += ["token-delete", "token-insert", "token-replace"]
        op = rng.choice(ops)
        if op.startswith("token"):
            s, e = spans[rng.randrange(len(spans))]
            old = text[s:e]
            if op == "token-delete":
                new, desc = "", f"delete token {old!r}"
            elif op == "token-insert":
                e = s
                new = _pad(text, s, e, rng.choice(MUTATION_TOKENS))
                desc = f"insert {new!r}"
            else:
                new = _pad(text, s, e, rng.choice(MUTATION_TOKENS))
                desc = f"replace token {old!r} by {new!r}"
        else:
            if op == "char-insert":
                s = e = rng.randint(0, len(text))
            else:
                s = rng.randrange(len(text))
                e = s + 1
            old = text[s:e]
            if op == "char-delete":
                new, desc = "", f"delete character {old!r}"
            elif op == "char-insert":
                new = rng.choice(MUTATION_CHARS)
                desc = f"insert character {new!r}"
            else:
                new = rng.choice(MUTATION_CHARS)
                desc = f"replace character {old!r} by {new!r}"
        mutated = text[:s] + new + text[e:]
        if mutated != text:
            return Mutant(mutated, s, f"{desc} at {index.where(s)} (offset {s})")
    raise ValueError("could not mutate text")  # unreachable in practice


def make_mutants(text: str, count: int, rng: random.Random) -> list[Mutant]:
    spans = token_spans(text) if count > 0 else []
    return [make_mutant(text, rng, spans) for _ in range(count)]
