"""The shared line and indentation helpers, and the target-version type."""

from __future__ import annotations

import pytest

from lexer.text import (
    count_line_ends,
    first_line,
    indentation,
    indentation_column,
    last_line,
    last_line_start,
    line_end_offsets,
    split_lines,
)
from lexer.version import NEWEST, OLDEST, SUPPORTED, TargetVersion
from lsp_server.decoding.line_mode import opens_block
from quotient_parser.quotient import Quotient


def test_split_lines_keeps_python_line_ends() -> None:
    text = "a\nb\r\nc\rd\x0ce\u2028f"
    assert split_lines(text) == ["a\n", "b\r\n", "c\r", "d\x0ce\u2028f"]
    assert "".join(split_lines(text)) == text
    assert split_lines("") == []
    assert split_lines("x\n") == ["x\n"]


def test_line_ends_count_crlf_once_and_ignore_other_breaks() -> None:
    text = "a\r\nb\rc\nd\x0c\u2028"
    assert line_end_offsets(text) == [3, 5, 7]
    assert count_line_ends(text) == 3
    assert last_line_start(text) == 7
    assert last_line("x = 1\r    y") == "    y"
    assert first_line("abc\r\ndef") == "abc"
    assert first_line("abc") == "abc"


def test_indentation_is_what_the_tokenizer_counts() -> None:
    assert indentation("\x0c  \tif x:") == "\x0c  \t"
    assert indentation("pass") == ""
    assert indentation_column("    ") == 4
    assert indentation_column("  \t") == 8
    assert indentation_column("\t  ") == 10
    assert indentation_column("  \x0c ") == 1


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_opens_block_with_every_line_end(newline: str) -> None:
    left = f"def f():{newline}    if x:"
    right = f"{newline}    return 1{newline}"
    assert opens_block(Quotient(left, right))
    left = f"def f():{newline}    x = 1"
    assert not opens_block(Quotient(left, right))


def test_target_version_spellings() -> None:
    assert TargetVersion.parse("3.12") == TargetVersion.parse((3, 12)) == (3, 12)
    assert str(TargetVersion.parse([3, 9])) == "3.9"
    assert TargetVersion.parse(" 3.10 ").code == 310
    assert (SUPPORTED[0], SUPPORTED[-1]) == (OLDEST, NEWEST)
    for bad in ("3", "three", "2.7", (3,), (3, 99), "4.0"):
        with pytest.raises(ValueError):
            TargetVersion.parse(bad)
