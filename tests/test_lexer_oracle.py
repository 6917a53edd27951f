"""The lexer against CPython: per-version verdicts and token streams.

* ``VERDICTS``: snippets with the lexer's verdict for 3.8 .. 3.15 (``o``: the
  text lexes, ``x``: LexError).  The lexer is held to the table, and the
  table to CPython's stored results (``stored_verdicts.py``): ``x`` must be
  rejected by ``ast.parse``, and ``o`` must be accepted or rejected for a
  non-lexical reason (a parse error).
* The standard library of each installed 3.12+ interpreter, compared with its
  ``tokenize`` by ``bench.tokenize_check``: a fixed sample by default, every
  file with ``--runslow``.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from stored_verdicts import OK, VERSIONS, stored_result, version_name

from bench.tokenize_check import compare, find_interpreter, stdlib_files
from lexer import LexError, LexState

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
    ("x = 1if y else 2", "oooooooo"),
    ("x = [1for y in z]", "oooooooo"),
    ("x = 1 if 1else 2", "oooooooo"),
    ("x = 0xffor 1", "oooooooo"),
    ("x = 1jand 1", "oooooooo"),
    ("x = 1not in y", "oooooooo"),
    ("x = 1abc", "ooxxxxxx"),
    ("x = 1andy", "ooxxxxxx"),
    ("x = 1 if 1elsewhere else 2", "ooxxxxxx"),
    ("x = 1e", "ooxxxxxx"),
    ("x = 1ex", "ooxxxxxx"),
    ("x = 1._", "ooxxxxxx"),
    ("x = 1.__class__", "ooxxxxxx"),
    ("x = 1e_1", "ooxxxxxx"),
    ("x = 0x1g", "ooxxxxxx"),
    ("x = 1jx", "ooxxxxxx"),
    ("x = 1.5jx", "ooxxxxxx"),
    ("x = 1é", "ooxooooo"),
    ("x = 1ifx", "oooooooo"),
    ("x = 1in_", "oooooooo"),
    ("x = 0b1if 1 else 2", "oooooooo"),
    ("x = 0o7or 1", "oooooooo"),
    ("x = 0or 1", "xxxxxxxx"),
    ("x = 0o", "xxxxxxxx"),
    ("x = 1e+x", "xxxxxxxx"),
    ("x = 01", "xxxxxxxx"),
    ("x = 0_9", "xxxxxxxx"),
    ("x = 0_", "xxxxxxxx"),
    ("x = 1__0", "xxxxxxxx"),
    ("x = 1_.5", "xxxxxxxx"),
    ("x = 0b12", "xxxxxxxx"),
    ("x = 0b1_", "xxxxxxxx"),
    ("x = 0o8", "xxxxxxxx"),
    ("x = 0o1_", "xxxxxxxx"),
    ("x = 0xg", "xxxxxxxx"),
    ("x = 09", "xxxxxxxx"),
    ("x = 00_0", "oooooooo"),
    ("x = 09.5", "oooooooo"),
    ("x = $", "xxxxxxxx"),
    ("x = ?", "xxxxxxxx"),
    ("x = `", "xxxxxxxx"),
    ("x = \x01", "xxxxxxxx"),
    ("x = \x0b", "xxxxxxxx"),
    ("x = a\xa0", "xxxxxxxx"),
    ("x = €", "xxxxxxxx"),
    ("x = a€", "xxxxxxxx"),
    ("x = ℌ", "oooooooo"),
    ("x = à", "oooooooo"),
    ("x = ̀", "xxxxxxxx"),
    ("\ufeffx = 1", "xxxxxxxx"),
    ("x = 1 ! 2", "xxxxxxxx"),
    ("x = 1 <> 2", "xxxxxxxx"),
    ("x = '\\x1'", "xxxxxxxx"),
    ("x = '\\N{NOPE}'", "xxxxxxxx"),
    ("x = '\\N{bullet}'", "oooooooo"),
    ("x = b'\\x1'", "xxxxxxxx"),
    ("x = b'é'", "xxxxxxxx"),
    ("x = '\\U00110000'", "xxxxxxxx"),
    ("x = '\\N{}'", "xxxxxxxx"),
    ("x = b'\\N{BULLET}'", "oooooooo"),
    ("x = '\\777'", "oooooooo"),
    ("x = ur'x'", "oooooooo"),
    ("x = 'abc", "xxxxxxxx"),
    ("x = '''abc", "xxxxxxxx"),
    ("x = 'a\rb'", "xxxxxxxx"),
    ("x = 'a\\\nb'", "oooooooo"),
    ("x = 1 \\\n", "xxxxxxxx"),
    ("x = 1 \\", "xxxxxxxx"),
    ("x = 1\\ \n", "xxxxxxxx"),
    ("x = 1 \\\n   ", "oooooooo"),
    ("x = 1 \\\n\n", "oooooooo"),
    ("x = 1 \\\r\n", "ooooxxxx"),
    ("x = 1 \\\r\n\\\r\n", "ooooxxxx"),
    ("x = 1\ry = 2\r", "oooooooo"),
    ("x = (1", "xxxxxxxx"),
    ("x = 1)", "xxxxxxxx"),
    ("x = (1]", "xxxxxxxx"),
    ("if x:\n    y\n  \\\n  z\n", "xoxxxxxx"),
    ("if x:\n  \\\n    y\n", "oooooooo"),
    ("if x:\n\\\n    y\n", "oooooooo"),
    ("if x:\n  y\n  \\\n\n  z\n", "oooooooo"),
    ("if x:\n  \\\n  \\\n    y\n", "oooooooo"),
    ("\\\nx = 1\n", "oooooooo"),
    ("if x:\n  y\n  \\\n  ", "oooooooo"),
    ("if x:\n\ty\n        z\n", "xxxxxxxx"),
    ("if x:\n        y\n\tz\n", "xxxxxxxx"),
    ("if x:\n    \ty\n\tz\n", "xxxxxxxx"),
    ("if x:\n  y\n z\n", "xxxxxxxx"),
    ("if x:\n\x0c  y\n", "oooooooo"),
    ("  \x0cx = 1\n", "oooooooo"),
    ("if x:\n    pass\n\t\n", "oooooooo"),
    ("x = f'{x!r}'", "oooooooo"),
    ("x = f'{x=}'", "oooooooo"),
    ("x = f'{x:=5}'", "oooooooo"),
    ("x = f'{x!=y}'", "oooooooo"),
    ("x = f'{a[1:2]}'", "oooooooo"),
    ("x = f'{x:{y:{z}}}'", "xxxxoooo"),
    ("x = f'{x:{y:{z:{w}}}}'", "xxxxxxxx"),
    ("x = f'}'", "xxxxxxxx"),
    ("x = f'{'", "xxxxxxxx"),
    ("x = f'{x}}'", "xxxxxxxx"),
    ("x = f'{'a'}'", "xxxxoooo"),
    ("x = f'{f'{x}'}'", "xxxxoooo"),
    ("x = f'''{f\"{f'{x}'}\"}'''", "oooooooo"),
    ("x = f'{x\n}'", "xxxxoooo"),
    ("x = f'''{x # c\n}'''", "xxxxoooo"),
    ("x = f'{x # c\n}'", "xxxxoooo"),
    ("x = f'{x:\n}'", "xxxxoooo"),
    ("x = f'{\"\\n\"}'", "xxxxoooo"),
    ("x = f'{x!r }'", "xxxxoooo"),
    ("x = f'{x:{y}a\n}'", "xxxxoxxx"),
    ("x = f'{x:{y}{{}'", "xxxxxooo"),
    ("x = f'{x\\\n}'", "xxxxoooo"),
    ("x = f'''{'''a'''}'''", "xxxxoooo"),
    ("x = f'\\N{BULLET}{x}'", "oooooooo"),
    ("x = f'\\x1{y}'", "xxxxxxxx"),
    ("x = f'{x!r:{y}}'", "oooooooo"),
    ("x = f'{x:{y!r:{z}}}'", "xxxxoooo"),
    ("x = f'{(x}'", "xxxxxxxx"),
    ("x = f'{x)}'", "xxxxxxxx"),
    ("x = f'{x:abc'", "xxxxxxxx"),
    ("x = f'{x! r}'", "xxxxxxxx"),
    ("x = f'{x!z}'", "xxxxoooo"),
    ("x = f'{x:{y}}}'", "xxxxxxxx"),
    ("x = f'{3!r}'", "oooooooo"),
    ("x = f'{x=!r:^20}'", "oooooooo"),
    ("x = rf'\\{x}'", "oooooooo"),
    ("x = t'{x}'", "oooooooo"),
    ("x = t'{x! r}'", "ooooooxx"),
    ("x = t'{x!r }'", "oooooooo"),
    ("x = t'}'", "ooooooxx"),
    ("x = t'{'", "ooooooxx"),
    ("x = t'{x:{y:{z:{w}}}}'", "ooooooxx"),
    ("x = tb'x'", "oooooooo"),
    ("x = t'\\N{BULLET}'", "oooooooo"),
    ("x = t'\\x1'", "xxxxxxxx"),
    ("x = rt'\\{x}'", "oooooooo"),
    ("x = t'{x\n}'", "xxxxxxoo"),
    ("x = t'''{x\n}'''", "oooooooo"),
    ("x = f'{x!r :}'", "xxxxoooo"),
    ("x = f'{x:{y! r}}'", "xxxxxxxx"),
    ("x = f'{x!\tr}'", "xxxxxxxx"),
]


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


@pytest.mark.parametrize("version", VERSIONS, ids=version_name)
def test_verdicts_agree_with_cpython(version: tuple[int, int]) -> None:
    """The table against each version's stored ``ast.parse`` result."""
    k = VERSIONS.index(version)
    wrong = []
    for src, verdict in VERDICTS:
        result = stored_result(src, version)
        assert result is not None, f"no stored verdict for {src!r}: see stored_verdicts.py"
        if verdict[k] == "x" and result == OK:
            wrong.append((src, "CPython accepts it"))
        elif verdict[k] == "o" and result != OK and LEXICAL.search(result):
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
