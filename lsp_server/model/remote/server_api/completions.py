"""Generated tokens and their alternatives, read from the servers' answers.

Three wire shapes carry per-token probabilities:

* llama.cpp's entries (``/completion``'s ``completion_probabilities`` and, on llama-server,
  ``/v1/completions``' ``logprobs.content``): ``{"id", "token", "bytes", "logprob",
  "top_logprobs": [{"id", "token", "bytes", "logprob"}, ...]}``, ids included;
* OpenAI's legacy completions shape (vLLM, llama-cpp-python): ``{"tokens": [str],
  "token_logprobs": [float], "top_logprobs": [{str: float}], "text_offset": [int]}``: text
  only, so ids are recovered from vLLM's ``token_id:N`` spelling
  (``return_tokens_as_token_ids``) or from a local copy of the vocabulary;
* no probabilities at all (``n_probs`` 0): the chosen ids alone (llama.cpp's ``tokens``).

``Step`` is one generated position in any of them; ``Candidate`` one alternative.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ServerProtocolError

__all__ = ["Candidate", "Completion", "CompletionEnd", "Step", "TokenResolver"]

#: Maps a token as a server spelled it to its id, or None when that is not possible.
TokenResolver = Callable[[str], "int | None"]
_TOKEN_ID = re.compile(r"token_id:(\d+)\Z")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One alternative at a position: its id (None when the server named it only by a
    text the vocabulary cannot map to a single id), log-probability and bytes (b"" for
    control tokens, which llama-server renders as nothing)."""

    token: int | None
    logprob: float
    piece: bytes


@dataclass(frozen=True, slots=True)
class Step:
    """One generated token, best alternatives first in ``top`` (empty without n_probs).

    ``position`` counts generated tokens from 0.  llama-server holds back a token that
    ends inside a UTF-8 character and reports it with the one that completes it: such a
    step has ``skipped`` > 0 (the held-back tokens' ids and alternatives are not sent) and
    its ``text`` holds the bytes of all of them, ``piece`` the token's own bytes (the
    alternatives in ``top`` are alternatives to ``piece``, after the held-back bytes).
    """

    position: int
    token: int | None
    logprob: float | None
    piece: bytes
    text: bytes
    top: tuple[Candidate, ...] = ()
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class CompletionEnd:
    """How a generation ended.

    ``stop``: "eos" (an end-of-generation token), "limit" (``n_predict`` or the context),
    "word" (a stop string), "cancelled" or "deadline" (ended by the caller), or the
    server's own word.  ``tokens``: every generated id where the server reports them
    (llama.cpp's ``return_tokens``, not streamed).
    """

    stop: str
    n_predicted: int = 0
    n_prompt: int = 0
    n_cached: int = 0
    tokens: tuple[int, ...] = ()
    timings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Completion:
    """A whole (not streamed) answer."""

    steps: tuple[Step, ...]
    end: CompletionEnd

    @property
    def tokens(self) -> tuple[int, ...]:
        """Every generated id: the server's list where given, else the steps' ids."""
        if self.end.tokens:
            return self.end.tokens
        return tuple(s.token for s in self.steps if s.token is not None)


# ---------------------------------------------------------------- shape checks


def _as(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        raise ServerProtocolError(f"{what} is {type(value).__name__}")
    return value


def _logprob(value: Any, what: str) -> float:
    if value is None:
        return -math.inf
    return float(_as(value, (int, float), what))


def _bytes(value: Any, fallback: str, what: str) -> bytes:
    if value is None:
        return fallback.encode("utf-8")
    try:
        return bytes(_as(value, list, what))
    except (TypeError, ValueError) as exc:
        raise ServerProtocolError(f"{what} is not a list of bytes") from exc


def _llama_candidate(entry: Any) -> Candidate:
    entry = _as(entry, dict, "a top_logprobs entry")
    text = entry.get("token", "")
    return Candidate(
        token=_as(entry.get("id"), int, "a candidate's id"),
        logprob=_logprob(entry.get("logprob", entry.get("prob")), "a logprob"),
        piece=_bytes(entry.get("bytes"), text if isinstance(text, str) else "", "bytes"),
    )


def _own_piece(
    token: int | None, top: Sequence[Candidate], text: bytes, skipped: int
) -> bytes | None:
    """The chosen token's own bytes: the text when nothing was held back before it, else
    its entry among the alternatives; None when neither tells (the caller asks the
    vocabulary)."""
    if not skipped:
        return text
    return next((c.piece for c in top if c.token == token and token is not None), None)


def llama_step(
    entry: Any, position: int, skipped: int = 0, piece_of: Callable[[int], bytes] | None = None
) -> Step:
    """A step from one llama.cpp probability entry (native or llama-server's OpenAI);
    ``piece_of`` gives a token's bytes where the entry does not."""
    entry = _as(entry, dict, "a completion_probabilities entry")
    token = _as(entry.get("id"), int, "a token id")
    text = entry.get("token", "")
    data = _bytes(entry.get("bytes"), text if isinstance(text, str) else "", "bytes")
    top_raw = entry.get("top_logprobs", entry.get("top_probs", []))
    top = tuple(_llama_candidate(c) for c in _as(top_raw, list, "top_logprobs"))
    piece = _own_piece(token, top, data, skipped)
    if piece is None:
        piece = piece_of(token) if piece_of is not None else data
    return Step(
        position=position,
        token=token,
        logprob=_logprob(entry.get("logprob", entry.get("prob")), "a logprob"),
        piece=piece,
        text=data,
        top=top,
        skipped=skipped,
    )


def legacy_steps(logprobs: Any, first_position: int, resolve: TokenResolver) -> list[Step]:
    """Steps from OpenAI's legacy ``logprobs`` object (vLLM, llama-cpp-python).

    Alternatives come as a ``{text: logprob}`` object: best first after sorting, and two
    tokens with the same text collapse into one entry, which ``resolve`` then cannot map
    to an id (it returns None for ambiguous texts).
    """
    logprobs = _as(logprobs, dict, "logprobs")
    tokens = _as(logprobs.get("tokens") or [], list, "logprobs.tokens")
    values = _as(logprobs.get("token_logprobs") or [None] * len(tokens), list, "token_logprobs")
    tops = _as(logprobs.get("top_logprobs") or [None] * len(tokens), list, "top_logprobs")
    if not len(tokens) == len(values) == len(tops):
        raise ServerProtocolError("logprobs lists of different lengths")
    steps: list[Step] = []
    for i, (text, value, top_map) in enumerate(zip(tokens, values, tops)):
        text = _as(text, str, "a token")
        alternatives: list[Candidate] = []
        for alt_text, alt_value in _as(top_map or {}, dict, "a top_logprobs entry").items():
            alternatives.append(
                Candidate(
                    resolve(alt_text), _logprob(alt_value, "a logprob"), _legacy_piece(alt_text)
                )
            )
        alternatives.sort(key=lambda c: -c.logprob)
        token = resolve(text)
        piece = _legacy_piece(text)
        steps.append(
            Step(
                first_position + i,
                token,
                None if value is None else _logprob(value, "a logprob"),
                piece,
                piece,
                tuple(alternatives),
            )
        )
    return steps


def _legacy_piece(text: str) -> bytes:
    """Bytes of a legacy token text; vLLM's ``bytes:\\xNN`` spelling of partial UTF-8."""
    if text.startswith("bytes:"):
        try:
            return text[6:].encode("latin-1").decode("unicode_escape").encode("latin-1")
        except (UnicodeError, ValueError):
            return text.encode("utf-8")
    if _TOKEN_ID.match(text):
        return b""  # vLLM's id spelling carries no text
    return text.encode("utf-8")


def resolve_token_id_spelling(fallback: TokenResolver | None) -> TokenResolver:
    """A resolver for vLLM's ``token_id:N`` texts, passing other texts to ``fallback``."""

    def resolve(text: str) -> int | None:
        match = _TOKEN_ID.match(text)
        if match:
            return int(match.group(1))
        return fallback(text) if fallback is not None else None

    return resolve
