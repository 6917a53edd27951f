"""How an oracle worker starts: the command and environment of one ``ast.parse`` oracle.

Shared by :mod:`bench.oracle`, which chooses the oracle, and :mod:`bench.wasm_oracles`,
which installs the WebAssembly builds of the versions no interpreter here has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["WORKER", "OracleSpec", "interpreter_spec"]

#: The worker every oracle runs: JSON lines in, one verdict a line out.
WORKER = Path(__file__).with_name("_oracle_worker.py")


@dataclass(frozen=True)
class OracleSpec:
    """How to start an oracle worker: a name for reports, a command, extra environment."""

    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


def interpreter_spec(python: str) -> OracleSpec:
    """The worker in a real interpreter (isolated mode, no site packages)."""
    return OracleSpec(python, (python, "-I", "-S", str(WORKER)))
