"""Extension: a single line at a line's start, continued over the lines the model is sure of.

In ``auto`` line mode the cursor at a line's start gets a single line
(:func:`.line_mode.single_line`): where a user inserts one line, more would be text to
delete, and a model that sees the code after the cursor is best at that one line.  But
where the gap is several lines (a block's body, the rest of a function) one line is
only a start.  Nothing in the cursor's surroundings tells the two apart (HumanEval's
single-line and multi-line tasks look alike there); the model does: after the right
single line it either writes the code after the cursor again or goes on with lines it
is unsure of, and where more lines belong it writes them with confidence.

So a complete single line from a FIM model is decoded on over several lines, from the
end of that line (the model's cache still holds it: :func:`.loop.resume`), and each
further line ends the middle before it unless the mean log-probability of its tokens
reaches ``LINE_CONFIDENCE`` (``DecodeOptions.line_confidence``) and it restates none of
R's next lines of code (``RightEcho.restates``: a model that skips a line of R or
changes a character of it has still gone past the middle's end); the likeliest end
and the echo of R apply as everywhere.  The single line is a stopping point of its
own, so the extension returns it where nothing after it is better.
"""

from __future__ import annotations

from dataclasses import replace

from lsp_server.model.backend import Backend
from quotient_parser.quotient import Quotient

from .loop import Decoder, resume
from .options import DecodeOptions
from .result import Completion
from .stopping import StopCheck

__all__ = ["LINE_CONFIDENCE", "extend"]

#: The mean log-probability per token (nats) a further line must reach: about 0.74 of
#: probability per token.  Chosen on the recorded generations of
#: ``bench.stopping_rules`` (rule ``sure-lines``; HumanEval, the 0.5B): -0.3 keeps the
#: multi-line tasks' passes and gains single-line ones; -0.2 and -0.1 lose multi-line
#: tasks, -0.5 gains fewer single-line ones.
LINE_CONFIDENCE = -0.3


def extend(
    backend: Backend,
    quotient: Quotient,
    options: DecodeOptions,
    first: Completion,
    stop: StopCheck,
) -> Completion | None:
    """``first``, a complete single line, decoded on over the lines the model is sure of
    under multi-line ``options``: the longer middle, or None where nothing follows it
    (or its tokens cannot be followed again)."""
    shared = _line_tokens(backend, first)
    if shared is None:
        return None
    ids, logprobs = shared
    line = replace(first, token_ids=ids, token_logprobs=logprobs)
    opts = replace(options, line_confidence=LINE_CONFIDENCE)
    result = resume(backend, quotient, opts, line, len(ids), _as_is, stop)
    longer = len(result.middle.rstrip()) > len(first.middle.rstrip())
    if result.complete and longer and result.middle.startswith(first.middle):
        return result
    return None


def _as_is(decoder: Decoder) -> None:
    """Nothing to set up: the decoder goes on as it would."""


def _line_tokens(backend: Backend, first: Completion) -> tuple[list[int], list[float]] | None:
    """Tokens that spell exactly ``first``'s middle, with their log-probabilities: its
    own, up to the one that ran over the line's end, whose part within the line is
    tokenized afresh (scored with that token's log-probability)."""
    if first.healed or not first.middle:
        return None
    vocab = backend.vocab_bytes
    middle = first.middle.encode("utf-8")
    data = b""
    count = 0
    for token in first.token_ids:
        more = data + vocab[token]
        if not middle.startswith(more):
            break
        data, count = more, count + 1
    ids, logprobs = first.token_ids[:count], first.token_logprobs[:count]
    rest = middle[len(data) :]
    if rest:
        try:
            extra = backend.tokenize(rest.decode("utf-8"))
        except UnicodeDecodeError:  # a token ended inside a character
            return None
        if b"".join(vocab[t] for t in extra) != rest or count >= len(first.token_logprobs):
            return None
        ids = ids + extra
        logprobs = logprobs + [first.token_logprobs[count]] + [0.0] * (len(extra) - 1)
    return ids, logprobs
