"""The grammar file loads for every target and keeps the properties the engine relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from lexer.version import SUPPORTED
from quotient_parser.grammar_tools import GRAMMAR_PATH, load_grammar

VERSIONS = [(v.major, v.minor) for v in SUPPORTED]


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: f"{v[0]}.{v[1]}")
def test_grammar_loads_for_every_target(version: tuple[int, int]) -> None:
    grammar = load_grammar(version)
    assert grammar.symbol_names[grammar.start] == "$start"
    for kind in ("NAME", "NUMBER", "STRING", "NEWLINE", "INDENT", "DEDENT", "ENDMARKER"):
        assert kind in grammar.terminal_ids
    assert ("match" in grammar.soft_keywords) == (version >= (3, 10))
    assert ("TSTRING_START" in grammar.terminal_ids) == (version >= (3, 14))
    assert ("lazy" in grammar.soft_keywords) == (version >= (3, 15))


def test_targets_differ() -> None:
    sizes = {len(load_grammar(v).productions) for v in VERSIONS}
    assert len(sizes) == len(VERSIONS)


def test_pattern_terminals_derived_from_text() -> None:
    ids = load_grammar((3, 13)).terminal_ids
    assert {"NONWILD_NAME", "REAL_NUMBER", "IMAG_NUMBER"} <= set(ids)
    assert "NONWILD_NAME" not in load_grammar((3, 9)).terminal_ids


def test_comment_at_line_end_inside_a_rule(tmp_path: Path) -> None:
    path = tmp_path / "g.gram"
    path.write_text("file: x ENDMARKER\nx:\n    | 'a'   # first\n    | 'b'   # second\n")
    assert set(load_grammar((3, 13), str(path)).terminal_ids) == {"a", "b", "ENDMARKER"}


def test_grammar_file_is_packaged_next_to_the_loader() -> None:
    assert GRAMMAR_PATH.is_file()
    assert GRAMMAR_PATH.read_text(encoding="utf-8").lstrip().startswith("#")
