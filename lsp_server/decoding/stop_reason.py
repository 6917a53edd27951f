"""Why a completion ended: the decoding loop's reasons, and the engine's where it did not
decode.  The editors show them (``fimlsp/status``, :mod:`lsp_server.status`)."""

from __future__ import annotations

from enum import Enum

__all__ = ["StopReason"]


class StopReason(str, Enum):
    """Why a completion request ended (str-valued: it prints and serializes as its value)."""

    # The decoding loop.
    EOS = "eos"  # the model ended the middle where it is complete
    CONNECTED = "connected"  # the middle connects to the right context: stopped there
    STEERED = "steered"  # steering brought the middle to a finish within the budget
    #: the model went on past a complete middle by writing the code after the cursor again:
    #: the middle ends before that
    REPEATS_RIGHT = "repeats_right"
    #: no later stopping point can be likelier than the best one found (each token only
    #: lowers the probability): the middle ends there
    LIKELIEST_END = "likeliest_end"
    #: a line after the middle's first that the model was unsure of (``line_confidence``):
    #: the middle ends before it
    UNSURE_LINE = "unsure_line"
    WITNESS = "witness"  # ended with the shortest finish the parser found (witnessEnding)
    MAX_TOKENS = "max_tokens"  # the token budget is spent (or no candidate can finish in it)
    NO_VIABLE_TOKEN = "no_viable_token"  # no candidate, top k or further down, fits
    DEADLINE = "deadline"
    CANCELLED = "cancelled"  # ``$/cancelRequest``, or a newer request for the document
    CHECKED_PREFIX = "checked_prefix"  # checked mode cut the output back until it parsed
    HEURISTIC_CUT = "heuristic_cut"  # heuristic mode: a shipping tool's rule ended the output
    # The engine, without decoding.
    REUSED = "reused"  # the user typed along the shown completion: the rest of it
    NO_MIDDLE_FITS = "no_middle_fits"  # the quotient is empty: no text makes the file valid
    TOO_LARGE = "too_large"  # longer than ``maxDocumentChars``
    NO_MODEL = "no_model"  # the model is loading or failed to load
    DISABLED = "disabled"  # ``enable`` is false

    def __str__(self) -> str:
        return str(self.value)
