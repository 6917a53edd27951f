"""Fill the middle with a language model, one syntax-checked token at a time.

The loop follows section VII-B of the seed paper and PICARD's top-k checking:
after each model step the candidates are ranked and tried in order against the
FIM quotient until one keeps the middle *viable*; an end-of-generation token is
accepted only where the middle is *complete* (``left + middle + right`` parses).
Where the middle ends when the model does not end it (:mod:`.stopping`): at the
likeliest complete middle (for a FIM model, the log-probability of the middle and
of ending there), before the model writes the code after the cursor again, and for a
single line at the model's own line break.  Near the end of the budget steering
brings the middle to a finish (:mod:`.steering`).

Four modes share the loop so that they can be compared on equal terms:

``constrained``   the above (the default);
``unconstrained`` the model's own choice at every step, no syntax checks;
``checked``       unconstrained, then the longest prefix of its output with
                  which ``ast.parse`` accepts the file;
``heuristic``     unconstrained, trimmed by the string rules shipping tools apply
                  (:mod:`.heuristic`).

The loop talks to the model only through the backend interface of
:mod:`lsp_server.model.backend` (rankings in, chosen tokens out), so it runs the
same against llama.cpp in process or a server.  The pieces:

* :mod:`.options`: the request's settings (the modes are :mod:`lsp_server.modes`');
* :mod:`.text`: token bytes to middle text (whole characters, token healing);
* :mod:`.ranking`: the order candidates are tried in (greedy or sampled);
* :mod:`.stopping`: when to stop, the best stopping point, the echo of R;
* :mod:`.heuristic`: heuristic mode's rules; :mod:`.edit_distance`: Levenshtein;
* :mod:`.loop`: the loop itself, ``build_prompt`` and ``resume`` (decode on after a
  prefix of an earlier generation);
* :mod:`.steering`: spending the budget knowing the distance to a finish;
* :mod:`.request`: one run of the loop from a request's prompt;
* :mod:`.attempts`: every run that decodes again, in the order it applies (the
  inside fallback, past the echo, restart, the line-mode fallback, alternatives):
  ``generate`` for one middle, ``generate_middles`` for a request's;
* the mechanics the attempts use: :mod:`.line_mode` (single or multi-line),
  :mod:`.restart` (where a middle that ran out of budget starts again),
  :mod:`.alternatives` (branching off a middle, ranking), :mod:`.checked` (checked
  mode's cut-back with ``ast.parse``);
* :mod:`.result`: the ``Completion`` and its timings; :mod:`.stop_reason`: why it ended.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .attempts import generate
    from .loop import build_prompt
    from .options import DecodeOptions
    from .result import Completion, DecodeTimes, Timings

#: Each name's module, imported on first use: the LSP front imports
#: :mod:`.stop_reason` (through :mod:`lsp_server.status`) and must not load the model
#: and the parser with it.
_HOMES = {
    "Completion": ".result",
    "DecodeOptions": ".options",
    "DecodeTimes": ".result",
    "Timings": ".result",
    "build_prompt": ".loop",
    "generate": ".attempts",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)


__all__ = [
    "Completion",
    "DecodeOptions",
    "DecodeTimes",
    "Timings",
    "build_prompt",
    "generate",
]
