"""The lexer against CPython: per-version verdicts and token streams.

* ``VERDICTS``: snippets with the lexer's verdict for 3.8 .. 3.13 (``o``: the
  text lexes, ``x``: LexError).  The lexer is held to the table everywhere;
  where a pyenv interpreter of that version is installed the table itself is
  held to CPython: ``x`` must be rejected by ``ast.parse``, and ``o`` must be
  accepted or rejected for a non-lexical reason (a parse error).
* The standard library of each installed 3.12+ interpreter, compared with its
  ``tokenize`` by ``lexer.check_stdlib``: a fixed sample by default, every
  file with ``--runslow``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import cache

import pytest

from lexer import LexError, LexState
from lexer.check_stdlib import compare, find_interpreter, stdlib_files

VERSIONS = [(3, 8), (3, 9), (3, 10), (3, 11), (3, 12), (3, 13)]

#: CPython messages of errors found by the tokenizer or when decoding literals.
LEXICAL = re.compile(
    r"invalid (decimal|hexadecimal|octal|binary|imaginary) literal|invalid digit|leading zeros"
    r"|unterminated|EOL while|EOF while|line continuation|unindent does not match"
    r"|inconsistent use of tabs|too many levels|too many nested|unmatched|closing parenthesis"
    r"|was never closed|invalid character|invalid non-printable|unicode error|value error"
    r"|ASCII literal|null bytes|f-string: expecting '}'|f-string: single|expression part cannot"
    r"|nested too deeply"
)

VERDICTS = [
    ("x = 1if y else 2", "oooooo"),
    ("x = [1for y in z]", "oooooo"),
    ("x = 1 if 1else 2", "oooooo"),
    ("x = 0xffor 1", "oooooo"),
    ("x = 1jand 1", "oooooo"),
    ("x = 1not in y", "oooooo"),
    ("x = 1abc", "ooxxxx"),
    ("x = 1andy", "ooxxxx"),
    ("x = 1 if 1elsewhere else 2", "ooxxxx"),
    ("x = 1e", "ooxxxx"),
    ("x = 1ex", "ooxxxx"),
    ("x = 1._", "ooxxxx"),
    ("x = 1.__class__", "ooxxxx"),
    ("x = 1e_1", "ooxxxx"),
    ("x = 0x1g", "ooxxxx"),
    ("x = 1jx", "ooxxxx"),
    ("x = 1.5jx", "ooxxxx"),
    ("x = 1é", "ooxooo"),
    ("x = 1ifx", "oooooo"),
    ("x = 1in_", "oooooo"),
    ("x = 0b1if 1 else 2", "oooooo"),
    ("x = 0o7or 1", "oooooo"),
    ("x = 0or 1", "xxxxxx"),
    ("x = 0o", "xxxxxx"),
    ("x = 1e+x", "xxxxxx"),
    ("x = 01", "xxxxxx"),
    ("x = 0_9", "xxxxxx"),
    ("x = 0_", "xxxxxx"),
    ("x = 1__0", "xxxxxx"),
    ("x = 1_.5", "xxxxxx"),
    ("x = 0b12", "xxxxxx"),
    ("x = 0b1_", "xxxxxx"),
    ("x = 0o8", "xxxxxx"),
    ("x = 0o1_", "xxxxxx"),
    ("x = 0xg", "xxxxxx"),
    ("x = 09", "xxxxxx"),
    ("x = 00_0", "oooooo"),
    ("x = 09.5", "oooooo"),
    ("x = $", "xxxxxx"),
    ("x = ?", "xxxxxx"),
    ("x = `", "xxxxxx"),
    ("x = \x01", "xxxxxx"),
    ("x = \x0b", "xxxxxx"),
    ("x = a\xa0", "xxxxxx"),
    ("x = €", "xxxxxx"),
    ("x = a€", "xxxxxx"),
    ("x = ℌ", "oooooo"),
    ("x = à", "oooooo"),
    ("x = ̀", "xxxxxx"),
    ("\ufeffx = 1", "xxxxxx"),
    ("x = 1 ! 2", "xxxxxx"),
    ("x = 1 <> 2", "xxxxxx"),
    ("x = '\\x1'", "xxxxxx"),
    ("x = '\\N{NOPE}'", "xxxxxx"),
    ("x = '\\N{bullet}'", "oooooo"),
    ("x = b'\\x1'", "xxxxxx"),
    ("x = b'é'", "xxxxxx"),
    ("x = '\\U00110000'", "xxxxxx"),
    ("x = '\\N{}'", "xxxxxx"),
    ("x = b'\\N{BULLET}'", "oooooo"),
    ("x = '\\777'", "oooooo"),
    ("x = ur'x'", "oooooo"),
    ("x = 'abc", "xxxxxx"),
    ("x = '''abc", "xxxxxx"),
    ("x = 'a\rb'", "xxxxxx"),
    ("x = 'a\\\nb'", "oooooo"),
    ("x = 1 \\\n", "xxxxxx"),
    ("x = 1 \\", "xxxxxx"),
    ("x = 1\\ \n", "xxxxxx"),
    ("x = 1 \\\n   ", "oooooo"),
    ("x = 1 \\\n\n", "oooooo"),
    ("x = 1 \\\r\n", "ooooxx"),
    ("x = 1 \\\r\n\\\r\n", "ooooxx"),
    ("x = 1\ry = 2\r", "oooooo"),
    ("x = (1", "xxxxxx"),
    ("x = 1)", "xxxxxx"),
    ("x = (1]", "xxxxxx"),
    ("if x:\n    y\n  \\\n  z\n", "xoxxxx"),
    ("if x:\n  \\\n    y\n", "oooooo"),
    ("if x:\n\\\n    y\n", "oooooo"),
    ("if x:\n  y\n  \\\n\n  z\n", "oooooo"),
    ("if x:\n  \\\n  \\\n    y\n", "oooooo"),
    ("\\\nx = 1\n", "oooooo"),
    ("if x:\n  y\n  \\\n  ", "oooooo"),
    ("if x:\n\ty\n        z\n", "xxxxxx"),
    ("if x:\n        y\n\tz\n", "xxxxxx"),
    ("if x:\n    \ty\n\tz\n", "xxxxxx"),
    ("if x:\n  y\n z\n", "xxxxxx"),
    ("if x:\n\x0c  y\n", "oooooo"),
    ("  \x0cx = 1\n", "oooooo"),
    ("if x:\n    pass\n\t\n", "oooooo"),
    ("x = f'{x!r}'", "oooooo"),
    ("x = f'{x=}'", "oooooo"),
    ("x = f'{x:=5}'", "oooooo"),
    ("x = f'{x!=y}'", "oooooo"),
    ("x = f'{a[1:2]}'", "oooooo"),
    ("x = f'{x:{y:{z}}}'", "xxxxoo"),
    ("x = f'{x:{y:{z:{w}}}}'", "xxxxxx"),
    ("x = f'}'", "xxxxxx"),
    ("x = f'{'", "xxxxxx"),
    ("x = f'{x}}'", "xxxxxx"),
    ("x = f'{'a'}'", "xxxxoo"),
    ("x = f'{f'{x}'}'", "xxxxoo"),
    ("x = f'''{f\"{f'{x}'}\"}'''", "oooooo"),
    ("x = f'{x\n}'", "xxxxoo"),
    ("x = f'''{x # c\n}'''", "xxxxoo"),
    ("x = f'{x # c\n}'", "xxxxoo"),
    ("x = f'{x:\n}'", "xxxxoo"),
    ("x = f'{\"\\n\"}'", "xxxxoo"),
    ("x = f'{x!r }'", "xxxxoo"),
    ("x = f'{x:{y}a\n}'", "xxxxox"),
    ("x = f'{x:{y}{{}'", "xxxxxo"),
    ("x = f'{x\\\n}'", "xxxxoo"),
    ("x = f'''{'''a'''}'''", "xxxxoo"),
    ("x = f'\\N{BULLET}{x}'", "oooooo"),
    ("x = f'\\x1{y}'", "xxxxxx"),
    ("x = f'{x!r:{y}}'", "oooooo"),
    ("x = f'{x:{y!r:{z}}}'", "xxxxoo"),
    ("x = f'{(x}'", "xxxxxx"),
    ("x = f'{x)}'", "xxxxxx"),
    ("x = f'{x:abc'", "xxxxxx"),
    ("x = f'{x! r}'", "xxxxxx"),
    ("x = f'{x!z}'", "xxxxoo"),
    ("x = f'{x:{y}}}'", "xxxxxx"),
    ("x = f'{3!r}'", "oooooo"),
    ("x = f'{x=!r:^20}'", "oooooo"),
    ("x = rf'\\{x}'", "oooooo"),
]


_PROBE = r"""
import ast, json, sys, warnings
warnings.simplefilter("ignore")
out = []
for src in json.load(sys.stdin):
    try:
        ast.parse(src)
        out.append("OK")
    except Exception as exc:
        out.append("%s: %s" % (type(exc).__name__, getattr(exc, "msg", exc)))
print(json.dumps(out))
"""


@cache
def cpython_verdicts(version: tuple[int, int]) -> list[str] | None:
    python = find_interpreter(version)
    if python is None:
        return None
    proc = subprocess.run(
        [str(python), "-c", _PROBE],
        input=json.dumps([src for src, _ in VERDICTS]),
        capture_output=True,
        text=True,
        check=True,
    )
    result: list[str] = json.loads(proc.stdout)
    return result


def lexes(src: str, version: tuple[int, int]) -> bool:
    try:
        state, _ = LexState.initial(target=version).feed(src)
        state.finish()
    except LexError:
        return False
    return True


@pytest.mark.parametrize("src,verdict", VERDICTS)
def test_lexer_verdicts(src: str, verdict: str) -> None:
    got = "".join("o" if lexes(src, v) else "x" for v in VERSIONS)
    assert got == verdict


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: f"{v[0]}.{v[1]}")
def test_verdicts_agree_with_cpython(version: tuple[int, int]) -> None:
    results = cpython_verdicts(version)
    if results is None:
        pytest.skip(f"no Python {version[0]}.{version[1]} interpreter")
    k = VERSIONS.index(version)
    wrong = []
    for (src, verdict), result in zip(VERDICTS, results):
        if verdict[k] == "x" and result == "OK":
            wrong.append((src, "CPython accepts it"))
        elif verdict[k] == "o" and result != "OK" and LEXICAL.search(result):
            wrong.append((src, result))
    assert not wrong


# -- token streams ---------------------------------------------------------------------------


def oracles() -> list[str]:
    """Interpreters whose tokenize uses the C tokenizer (3.12+)."""
    found = []
    for version in [(3, 12), (3, 13)]:
        python = find_interpreter(version)
        if python is not None:
            found.append(str(python))
    return found


@pytest.mark.parametrize("python", oracles() or ["none"])
def test_stdlib_sample_matches_tokenize(python: str) -> None:
    if python == "none":
        pytest.skip("no Python 3.12+ interpreter")
    root = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    files = stdlib_files(root)
    picked = files[:: max(1, len(files) // 40)]
    picked += [
        os.path.join(root, name)
        for name in ["test/test_fstring.py", "test/test_tokenize.py", "test/test_grammar.py"]
        if os.path.exists(os.path.join(root, name))
    ]
    results = list(compare(python, picked))
    bad = [r for r in results if r.status in ("mismatch", "lexerror")]
    assert not bad
    assert sum(r.status == "ok" for r in results) >= 30


@pytest.mark.slow
@pytest.mark.parametrize("python", oracles() or ["none"])
def test_whole_stdlib_matches_tokenize(python: str) -> None:
    if python == "none":
        pytest.skip("no Python 3.12+ interpreter")
    results = list(compare(python))
    bad = [r for r in results if r.status in ("mismatch", "lexerror")]
    assert not bad
    assert sum(r.status == "ok" for r in results) > 1000
