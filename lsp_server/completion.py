"""Fill the middle with a language model, one syntax-checked token at a time.

The loop follows section VII-B of the seed paper and PICARD's top-k checking:
after each model step the candidates are ranked by the logits and tried in
order against the FIM quotient until one keeps the middle *viable*; an
end-of-generation token is accepted only where the middle is *complete*
(``left + middle + right`` parses).  When no candidate in the top k is viable
generation stops; at the token or time limit the best complete stopping
point seen is returned (length-normalised log-probability including the
end-of-generation probability there).  Before it comes to that, once half the
token budget is spent without the middle ever being complete, the loop *closes*:
it looks among the model's best few viable candidates for one that completes
the middle and stops there (only a decoder that knows the quotient can do this;
it is what lets a model that never sees the right context meet it).

Three modes share the loop so that they can be compared on equal terms:

``constrained``  the above (the default);
``unconstrained`` the model's own choice at every step, no syntax checks;
``checked``      unconstrained, then the longest prefix of its output with
                 which ``ast.parse`` accepts the file.

Token text comes from the model's vocabulary as bytes; a token that ends
inside a UTF-8 sequence is held back until the character is whole.  When
the cursor is inside a word, the word's last token is taken out of the prompt
and the first generated tokens must reproduce it (token healing), because a
prompt cut mid-token is text the model never saw in training.
"""

from __future__ import annotations

import ast
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from lexer.text import last_line
from lexer.version import NEWEST, TargetLike
from lsp_server.model.errors import Interrupted
from quotient_parser.quotient import Quotient, QuotientState

__all__ = ["Completion", "DecodeOptions", "LanguageModel", "build_prompt", "generate"]

Mode = Literal["constrained", "unconstrained", "checked"]
FloatArray = npt.NDArray[np.float32]


class LanguageModel(Protocol):
    """What the decoder needs from a model (``lsp_server.model.FimModel`` provides it)."""

    @property
    def vocab_bytes(self) -> list[bytes]: ...
    @property
    def eog_ids(self) -> Sequence[int]: ...
    @property
    def has_fim(self) -> bool: ...
    def eog(self, token: int) -> bool: ...
    def tokenize(
        self, text: str, add_special: bool = ..., parse_special: bool = ...
    ) -> list[int]: ...
    def build_fim_prompt(
        self, prefix: str, suffix: str, max_new_tokens: int = ..., margin: int = ...
    ) -> list[int]: ...
    def evaluate(
        self, tokens: Sequence[int], interrupt: Callable[[], bool] | None = ...
    ) -> FloatArray: ...
    def append(self, token: int) -> FloatArray: ...


@dataclass(frozen=True)
class DecodeOptions:
    """Settings of one completion request."""

    mode: Mode = "constrained"
    max_tokens: int = 128
    top_k: int = 50
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    single_line: bool = False
    deadline_s: float | None = None
    token_healing: bool = True
    #: Stop at the first line end where the middle is complete.  None: only for
    #: models without FIM tokens, which never see the right context and so
    #: would go on to write what already follows the cursor.
    stop_when_connected: bool | None = None
    #: Closing: once this share of ``max_tokens`` is spent and the middle has never
    #: been complete, each step prefers, among the first ``closing_candidates`` viable
    #: candidates in the model's order, one after which the middle is complete, and
    #: stops there.  0 disables it.
    closing_share: float = 0.5
    closing_candidates: int = 8


@dataclass
class Completion:
    """The middle and how it came to be."""

    middle: str
    stop_reason: str
    complete: bool | None
    tokens: int
    timings: dict[str, float] = field(default_factory=dict)
    parser_us: list[float] = field(default_factory=list)
    healed: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "middle": self.middle,
            "stop_reason": self.stop_reason,
            "complete": self.complete,
            "tokens": self.tokens,
            "timings": self.timings,
            "healed": self.healed,
        }


class _Utf8Buffer:
    """Split byte strings into whole characters and a held-back incomplete tail."""

    @staticmethod
    def split(data: bytes) -> tuple[str, bytes] | None:
        """(decodable text, incomplete tail), or None for bytes that are not UTF-8."""
        try:
            return data.decode("utf-8"), b""
        except UnicodeDecodeError as exc:
            if exc.reason != "unexpected end of data" or exc.end != len(data):
                return None
            head = data[: exc.start].decode("utf-8")
            return head, data[exc.start :]


def _heal_split(model: LanguageModel, left: str) -> tuple[str, str]:
    """Split the left context before the last token of a word under the cursor."""
    if not left or not (left[-1].isalnum() or left[-1] == "_"):
        return left, ""
    line = last_line(left)
    tokens = model.tokenize(line)
    if not tokens:
        return left, ""
    vocab = model.vocab_bytes
    last = vocab[tokens[-1]].decode("utf-8", errors="replace")
    if (
        not last
        or not line.endswith(last)
        or not all(c.isalnum() or c == "_" for c in last.strip())
    ):
        return left, ""
    cut = len(left) - len(last)
    return left[:cut], left[cut:]


#: Stand-ins for a character still incomplete in held-back bytes: a letter that can
#: be part of a name, and a symbol that can only be in a string or a comment.
_NON_ASCII_STAND_INS = ("\u00e9", "\u20ac")


def _can_take_non_ascii(state: QuotientState) -> bool:
    """Whether some non-ASCII character can come next: a token that ends inside a
    UTF-8 sequence must not lead the middle where no such character fits."""
    return any(state.feed(char).viable for char in _NON_ASCII_STAND_INS)


def _log_softmax(logits: FloatArray) -> FloatArray:
    top = float(np.max(logits))
    shifted = logits - top
    return shifted - float(np.log(np.sum(np.exp(shifted))))


class _Ranker:
    """Orders candidate tokens: greedy, or sampling order with temperature and top-p."""

    def __init__(self, options: DecodeOptions):
        self.options = options
        self.rng = np.random.default_rng(options.seed)

    def order(self, logits: FloatArray, k: int) -> npt.NDArray[np.intp]:
        opts = self.options
        k = max(1, min(k, logits.shape[0]))
        if opts.temperature <= 0:
            top = np.argpartition(-logits, k - 1)[:k]
            return top[np.argsort(-logits[top], kind="stable")]
        scaled = logits / opts.temperature
        top = np.argpartition(-scaled, k - 1)[:k]
        top = top[np.argsort(-scaled[top], kind="stable")]
        if opts.top_p < 1.0:
            probs = np.exp(scaled[top] - scaled[top[0]])
            probs /= probs.sum()
            keep = int(np.searchsorted(np.cumsum(probs), opts.top_p) + 1)
            top = top[:keep]
        # Gumbel-max: sorting perturbed scores yields a sample without replacement.
        gumbel = self.rng.gumbel(size=top.shape[0])
        return top[np.argsort(-(scaled[top] + gumbel), kind="stable")]


def build_prompt(
    model: LanguageModel, left: str, right: str, options: DecodeOptions
) -> tuple[list[int], str]:
    """The prompt's tokens, and the text token healing took out of it (owed by the
    first generated tokens)."""
    prompt_left, forced = _heal_split(model, left) if options.token_healing else (left, "")
    prompt = model.build_fim_prompt(prompt_left, right, max_new_tokens=options.max_tokens)
    if not prompt:  # no FIM tokens, no BOS and nothing before the cursor
        prompt = model.tokenize("\n")
    return prompt, forced


def generate(
    model: LanguageModel,
    left: str,
    right: str,
    options: DecodeOptions | None = None,
    *,
    quotient: Quotient | None = None,
    target: TargetLike = NEWEST,
    cancel: Callable[[], bool] | None = None,
) -> Completion:
    """Generate the middle between ``left`` and ``right``.

    ``quotient`` may be passed in to reuse one built earlier (the language
    server keeps a builder per document); it must be for (left, right).
    ``cancel`` is polled between tokens.
    """
    opts = options or DecodeOptions()
    started = time.perf_counter()
    deadline = None if opts.deadline_s is None else started + opts.deadline_s
    timings: dict[str, float] = {}

    if opts.mode == "constrained" and quotient is None:
        t0 = time.perf_counter()
        quotient = Quotient(left, right, target)
        timings["quotient_ms"] = (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    prompt, forced = build_prompt(model, left, right, opts)
    timings["prompt_tokens"] = float(len(prompt))

    interrupted_by: str | None = None

    def interrupt() -> bool:
        nonlocal interrupted_by
        interrupted_by = _stop_reason(cancel, deadline)
        return interrupted_by is not None

    bounded = cancel is not None or deadline is not None
    try:
        logits = model.evaluate(prompt, interrupt=interrupt if bounded else None)
    except Interrupted:
        # A long prompt on a slow machine: give up for now; what was decoded stays in
        # the model's cache, so asking again at this place goes on from there.
        now = time.perf_counter()
        timings["prompt_ms"], timings["total_ms"] = (now - t0) * 1e3, (now - started) * 1e3
        stop = interrupted_by or "deadline"
        return Completion("", stop, False if opts.mode == "constrained" else None, 0, timings)
    timings["prompt_ms"] = (time.perf_counter() - t0) * 1e3

    decoder = _Decoder(model, opts, quotient, forced, deadline, cancel)
    result = decoder.run(logits)
    if opts.mode == "checked":
        result = _checked_prefix(result, left, right)
    result.healed = forced
    result.timings.update(timings)
    result.timings["total_ms"] = (time.perf_counter() - started) * 1e3
    if result.tokens:
        gen_ms = result.timings.get("generate_ms", 0.0)
        result.timings["tokens_per_s"] = result.tokens / (gen_ms / 1e3) if gen_ms > 0 else 0.0
    if result.parser_us:
        ordered = sorted(result.parser_us)
        result.timings["parser_us_per_token_median"] = ordered[len(ordered) // 2]
        result.timings["parser_us_per_token_p99"] = ordered[
            min(len(ordered) - 1, int(len(ordered) * 0.99))
        ]
    return result


def _stop_reason(cancel: Callable[[], bool] | None, deadline: float | None) -> str | None:
    """Why the request must stop now ("cancelled" or "deadline"), or None."""
    if cancel is not None and cancel():
        return "cancelled"
    if deadline is not None and time.perf_counter() > deadline:
        return "deadline"
    return None


#: Completeness checks spent looking for a stopping point inside tokens.
_IN_TOKEN_STOP_CHECKS = 128


class _Decoder:
    """One generation; holds the loop's state so each piece stays small."""

    def __init__(
        self,
        model: LanguageModel,
        options: DecodeOptions,
        quotient: Quotient | None,
        forced: str,
        deadline: float | None,
        cancel: Callable[[], bool] | None,
    ):
        self.model = model
        self.opts = options
        self.constrained = options.mode == "constrained"
        connect = options.stop_when_connected
        self.stop_when_connected = (not model.has_fim) if connect is None else connect
        self.right_starts_line = quotient is not None and quotient.right[:1] in ("\n", "\r", "")
        self.vocab = model.vocab_bytes
        self.eog_ids = list(model.eog_ids)
        self.ranker = _Ranker(options)
        self.deadline = deadline
        self.cancel = cancel
        self.forced = forced
        self.held = b""
        self.middle = ""
        self.state: QuotientState | None = quotient.initial if quotient is not None else None
        self.logprob = 0.0
        self.tokens = 0
        self.parser_us: list[float] = []
        # best complete stopping point: (score, middle)
        self.best: tuple[float, str] | None = None
        self.boundaries: list[tuple[str, QuotientState]] = []
        self.closing_from = (
            int(options.max_tokens * options.closing_share)
            if 0 < options.closing_share < 1 and options.closing_candidates > 0
            else None
        )
        self.closed = False  # the last token was chosen because it completes the middle

    # -- candidate checks -------------------------------------------------

    def _text_of(self, token: int) -> tuple[str, bytes, str] | None:
        """(middle text, held bytes, forced text left) after ``token``, or None."""
        split = _Utf8Buffer.split(self.held + self.vocab[token])
        if split is None:
            return None
        text, held = split
        forced = self.forced
        if forced:
            if forced.startswith(text):
                rest = forced[len(text) :]
                if held and not rest.encode("utf-8").startswith(held):
                    return None  # the held bytes cannot become the healed text
                return "", held, rest
            if text.startswith(forced):
                text, forced = text[len(forced) :], ""
            else:
                return None
        if self.opts.single_line and ("\n" in text or "\r" in text):
            return None
        return text, held, forced

    def run(self, logits: FloatArray) -> Completion:
        opts = self.opts
        gen_start = time.perf_counter()
        stop = "max_tokens"
        while self.tokens < opts.max_tokens:
            interrupted_by = _stop_reason(self.cancel, self.deadline)
            if interrupted_by is not None:
                stop = interrupted_by
                break
            if self.stop_when_connected and self.tokens and self._connected():
                stop = "connected"
                break
            chosen = self._choose(logits)
            if chosen is None:
                stop = "no_viable_token"
                break
            token, is_end = chosen
            if is_end:
                stop = "eos"
                break
            self.tokens += 1
            if self.closed:
                stop = "connected"
                break
            logits = self.model.append(token)
        timings = {"generate_ms": (time.perf_counter() - gen_start) * 1e3}
        middle = self.middle
        complete: bool | None = None
        if self.constrained and self.state is not None:
            if stop in ("eos", "connected"):
                complete = True
            else:
                middle, complete = self._fallback(stop)
        elif stop == "eos" and self.held:
            middle += self.held.decode("utf-8", errors="replace")
        return Completion(middle, stop, complete, self.tokens, timings, self.parser_us)

    def _choose(self, logits: FloatArray) -> tuple[int, bool] | None:
        """Pick the next token; returns (token, is_end_of_generation) or None."""
        opts = self.opts
        logprobs: FloatArray | None = None
        # While token healing still owes text, or a character is incomplete, any token
        # of the vocabulary that goes on with it may come next, not only the top k.
        top_k = len(self.vocab) if self.forced or self.held else opts.top_k
        if not self.constrained:
            # The model's own choice: the first candidate that keeps the healed prefix
            # and the single-line rule (the top one, unless one of those rejects it).
            for token in self.ranker.order(logits, top_k):
                tok = int(token)
                if self.model.eog(tok):
                    return tok, True
                got = self._text_of(tok)
                if got is None:  # breaks the healed prefix or the single-line rule
                    continue
                self.middle += got[0]
                self.held, self.forced = got[1], got[2]
                return tok, False
            return None

        assert self.state is not None
        parser_ns = 0
        order = self.ranker.order(logits, top_k)
        state = self.state
        # Track the best stopping point here: is the middle so far complete?
        # (Text still owed to token healing is the left context's own text, so
        # it does not stand in the way of stopping.)
        # The check is skipped where stopping could not beat the best point already
        # found, which spares most checks once one exists.
        if not self.held:
            logprobs = _log_softmax(logits)
            end_lp = (
                float(np.logaddexp.reduce(logprobs[self.eog_ids])) if self.eog_ids else -math.inf
            )
            score = (self.logprob + end_lp) / (self.tokens + 1)
            if self.best is None or score > self.best[0]:
                t0 = time.perf_counter_ns()
                done = state.complete
                parser_ns += time.perf_counter_ns() - t0
                if done:
                    self.best = (score, self.middle)
        result: tuple[int, bool] | None = None
        closing = (
            self.closing_from is not None
            and self.tokens >= self.closing_from
            and self.best is None
            and not self.forced
        )
        if closing:
            t0 = time.perf_counter_ns()
            closer = self._closing_candidate(order, state)
            parser_ns += time.perf_counter_ns() - t0
            if closer is not None:
                tok, text, new_state = closer
                if logprobs is None:
                    logprobs = _log_softmax(logits)
                self._take(tok, text, b"", "", state, new_state, float(logprobs[tok]))
                self.closed = True
                self.parser_us.append(parser_ns / 1e3)
                return tok, False
        for token in order:
            tok = int(token)
            if self.model.eog(tok):
                if not self.held:
                    t0 = time.perf_counter_ns()
                    done = state.complete
                    parser_ns += time.perf_counter_ns() - t0
                    if done:
                        result = (tok, True)
                        break
                continue
            got = self._text_of(tok)
            if got is None:
                continue
            text, held, forced = got
            if not self.vocab[tok]:
                continue  # an empty token would loop without progress
            t0 = time.perf_counter_ns()
            new_state = state.feed(text) if text else state
            ok = new_state.viable
            if ok and held and not forced:
                ok = _can_take_non_ascii(new_state)
            parser_ns += time.perf_counter_ns() - t0
            if not ok:
                continue
            if logprobs is None:
                logprobs = _log_softmax(logits)
            self._take(tok, text, held, forced, state, new_state, float(logprobs[tok]))
            result = (tok, False)
            break
        self.parser_us.append(parser_ns / 1e3)
        return result

    def _take(
        self,
        token: int,
        text: str,
        held: bytes,
        forced: str,
        state: QuotientState,
        new_state: QuotientState,
        logprob: float,
    ) -> None:
        """Append a chosen token's text to the middle."""
        self.logprob += logprob
        self.boundaries.append((self.middle, state))  # the middle that ``state`` is for
        self.middle += text
        self.held, self.forced = held, forced
        self.state = new_state

    def _closing_candidate(
        self, order: npt.NDArray[np.intp], state: QuotientState
    ) -> tuple[int, str, QuotientState] | None:
        """The best-ranked of the first few viable candidates that completes the middle."""
        viable = 0
        for token in order:
            tok = int(token)
            if self.model.eog(tok) or not self.vocab[tok]:
                continue
            got = self._text_of(tok)
            if got is None or got[1] or not got[0]:
                continue  # incomplete character, or nothing to add
            new_state = state.feed(got[0])
            if not new_state.viable:
                continue
            if new_state.complete:
                return tok, got[0], new_state
            viable += 1
            if viable >= self.opts.closing_candidates:
                break
        return None

    def _past_deadline(self) -> bool:
        return _stop_reason(None, self.deadline) is not None

    def _connected(self) -> bool:
        """The middle is complete and ends a line (see ``stop_when_connected``)."""
        if self.state is None or self.held:
            return False
        at_line_end = self.middle.endswith(("\n", "\r")) or self.right_starts_line
        return at_line_end and self.state.complete

    def _fallback(self, stop: str) -> tuple[str, bool]:
        """The middle to return when generation did not end by itself."""
        assert self.state is not None
        if self.best is not None:
            return self.best[1], True
        if not self.held and self.state.complete:
            return self.middle, True
        # No token boundary was a valid end: look inside the tokens, longest first,
        # each cut once, from the state at the start of the token it falls in.
        # Bounded, and by the deadline: this runs after generation has stopped.
        budget = _IN_TOKEN_STOP_CHECKS
        end = len(self.middle)
        for middle, state in reversed(self.boundaries):
            for cut in range(end, len(middle) - 1, -1):
                budget -= 1
                if budget < 0 or self._past_deadline():
                    return self.middle, False
                candidate = self.middle[:cut]
                if state.feed(candidate[len(middle) :]).complete:
                    return candidate, True
            end = min(end, len(middle) - 1)
        return self.middle, False


def _checked_prefix(result: Completion, left: str, right: str) -> Completion:
    """Keep the longest prefix of the output with which the file parses (ast.parse)."""
    middle = result.middle
    for cut in range(len(middle), -1, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(left + middle[:cut] + right)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        result.middle = middle[:cut]
        result.complete = True
        if cut < len(middle):
            result.stop_reason = "checked_prefix"
        return result
    result.complete = False
    return result
