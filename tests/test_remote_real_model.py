"""The shared server with real weights: llama-server serving Qwen2.5-Coder-0.5B on the
CPU gives, through the remote backend, the middles the model gives in process.

The server is built from the llama.cpp that llama-cpp-python vendors (the same code as
in process) and runs with one thread.  A middle that the model ended, or that connected
or repeated R, must be the in-process one token for token; one stopped at the token
limit is the best stopping point so far, whose score needs the probability of ending
there, which the server sends only when an end token is among the alternatives it
sends (``RemoteRanking.end_logprob``), so there the stop reason and token count must
agree and the middle may not.
"""

# Fixtures imported from other test modules are requested by parameter name, which ruff
# reads as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_llama_server import llama_server_binary  # noqa: F401
from test_real_model import ROLLING_MAX, qwen, qwen_path  # noqa: F401
from test_remote import assert_same_generation

from bench.llama_server import running_llama_server
from lsp_server.decoding import DecodeOptions, generate
from lsp_server.model import FimModel
from lsp_server.model.remote import RemoteBackend, open_remote
from lsp_server.modes import Mode

N_CTX = 2048

#: Places a user completes: mid-line, a line of its own, a blank line, a block to open.
CUTS = [
    ("def mean(values):\n    total = sum(", ")\n    return total / len(values)\n"),
    (
        "def has_close_elements(numbers, threshold):\n"
        "    for idx, elem in enumerate(numbers):\n"
        "        for idx2, elem2 in enumerate(numbers):\n"
        "            if idx != idx2:\n"
        "                distance = abs(elem - elem2)\n"
        "                if distance < threshold:\n",
        "\n    return False\n",
    ),
    (ROLLING_MAX, "\n    return result\n"),
    ("import os\n\n\ndef list_python_files(folder):\n", "\n\nprint(list_python_files('.'))\n"),
    ("class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(", "\n"),
]


@pytest.fixture(scope="module")
def remote(
    llama_server_binary: Path, qwen_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RemoteBackend]:
    logs = tmp_path_factory.mktemp("qwen-server")
    with (
        running_llama_server(
            llama_server_binary, qwen_path, ctx_size=N_CTX, threads=1, log_dir=logs
        ) as server,
        open_remote(server.url) as backend,
    ):
        yield backend


@pytest.mark.parametrize("mode", ["constrained", "unconstrained"])
def test_the_server_gives_the_in_process_middles(
    remote: RemoteBackend, qwen: FimModel, mode: Mode
) -> None:
    # one generation per middle, no look beyond the server's top n (a request of its own)
    options = DecodeOptions(
        mode=mode, max_tokens=24, token_healing=False, further_down=0, restart=False
    )
    for left, right in CUTS:
        expected = generate(qwen, left, right, options, target=(3, 11))
        got = generate(remote, left, right, options, target=(3, 11))
        assert_same_generation(got, expected)
