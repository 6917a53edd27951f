"""bench.memory_growth against the real server: the engine process's heap (its
automata, its census, its cyclic garbage) and the front's tables, both reported."""

from __future__ import annotations

import io
import json

from bench.memory_growth import main


def test_a_storm_reports_the_engines_heap_and_the_fronts_tables() -> None:
    out = io.StringIO()
    argv = ["--storms", "2", "--changes", "20", "--seed", "0", "--plain", "--collect"]
    assert main([*argv, "--json", "--no-progress"], out=out) == 0
    report = json.loads(out.getvalue())
    last = report["rows"][-1]
    tables = last["tables"]
    assert "unanswered" not in last and last["rssMb"] > 0
    assert last["frontRssMb"] > 0 and tables["documents"] == 0  # the storm's file closed
    assert any(name.startswith("automaton_") for name in tables), tables
    assert tables["census"]["function"] > 1_000
    assert tables["retired_automata_alive"] == 0
    # A full collection finds none of the project's own objects in cycles (quotients,
    # states, interrupted requests' frames).
    garbage = last["cyclicGarbage"]
    own = ("quotient_parser", "lexer", "lsp_server")
    assert not [name for name in garbage["byType"] if name.startswith(own)], garbage
    assert garbage["frames"] == {}, garbage
