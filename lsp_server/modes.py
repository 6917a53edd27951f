"""The choices a user makes about generation: the decoding mode, the line mode and the
API of an inference server.

Plain literals with their tuples of values, in one light module: the settings, the
command line, the decoding loop and the benchmarks take them from here, and the
editors' settings (``editors/vscode/src/config.ts``, ``editors/nvim/lua/fimlsp/config.lua``)
list the same values (``tests/test_editor_status.py`` checks).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["LINE_MODES", "MODES", "SERVER_APIS", "LineMode", "Mode", "ServerApi"]

#: ``constrained``: the syntax-checked loop (the default); ``unconstrained``: the model's
#: own choice at every step; ``checked``: unconstrained, then the longest prefix of its
#: output with which ``ast.parse`` accepts the file; ``heuristic``: unconstrained, then
#: trimmed by the string rules shipping tools use (``decoding/heuristic.py``).
Mode = Literal["constrained", "unconstrained", "checked", "heuristic"]
MODES: tuple[Mode, ...] = get_args(Mode)

#: ``single``: the middle stays on the cursor's line; ``multi``: it may span lines;
#: ``auto``: multi-line where the cursor opens a block or one line cannot connect, and
#: for a FIM model inside a line of code or over the further lines it is sure of
#: (``decoding/line_mode.py``, ``decoding/extend.py``).
LineMode = Literal["auto", "single", "multi"]
LINE_MODES: tuple[LineMode, ...] = get_args(LineMode)

#: The API an inference server (a ``model`` URL) speaks: ``auto`` asks it
#: (``lsp_server/model/remote/server_api``).
ServerApi = Literal["auto", "llama.cpp", "openai"]
SERVER_APIS: tuple[ServerApi, ...] = get_args(ServerApi)
