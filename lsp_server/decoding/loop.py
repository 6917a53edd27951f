"""The decoding loop: one syntax-checked token at a time, against any backend.

Each step asks the backend's generation for its ranking, orders the candidates
(:mod:`.ranking`), notes whether stopping here would be the best stopping point yet
(:mod:`.stopping`), and takes the first candidate whose text (:mod:`.text`) keeps the
middle viable, or an end token where the middle is complete.  Once closing is due it
first looks for a candidate that completes the middle.  The backend then advances by
the chosen token.  Nothing here depends on how the backend computes its ranking.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from lexer.text import first_line
from lexer.version import NEWEST, TargetLike
from lsp_server.model.backend import Backend, Generation, IdArray, TokenRanking
from lsp_server.model.errors import Interrupted
from lsp_server.status import StopReason
from quotient_parser.quotient import Quotient, QuotientState

from .checked import checked_prefix
from .options import DecodeOptions
from .ranking import Ranker
from .result import Completion, DecodeTimes
from .stopping import StopCheck, StoppingPoints
from .text import can_take_non_ascii, heal_split, token_text

__all__ = ["Decoder", "build_prompt", "generate"]

#: A choice: (token, whether it ends the generation), or None when nothing fits.
Choice = tuple[int, bool] | None


def build_prompt(
    backend: Backend, left: str, right: str, options: DecodeOptions
) -> tuple[list[int], str]:
    """The prompt's tokens, and the text token healing took out of it (owed by the
    first generated tokens)."""
    prompt_left, owed = heal_split(backend, left) if options.token_healing else (left, "")
    prompt = backend.build_fim_prompt(
        prompt_left,
        right,
        max_new_tokens=options.max_tokens,
        path=options.file_path,
        budget=options.prompt_budget,
    )
    if not prompt:  # no FIM tokens, no BOS and nothing before the cursor
        prompt = backend.tokenize("\n")
    return prompt, owed


def generate(
    backend: Backend,
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
    ``cancel`` is polled while the prompt is read and between tokens.
    """
    opts = options or DecodeOptions()
    times = DecodeTimes()
    stop = StopCheck(cancel, None if opts.deadline_s is None else times.started + opts.deadline_s)
    if opts.constrained and quotient is None:
        quotient = Quotient(left, right, target)
        times.quotient_built = time.perf_counter()
    prompt, owed = build_prompt(backend, left, right, opts)
    try:
        generation = backend.start(prompt, stop if stop.bounded else None)
    except Interrupted:
        # A long prompt on a slow machine: give up for now; what was read stays with the
        # backend, so asking again at this place goes on from there.
        times.stopped = times.finished = time.perf_counter()
        reason = stop.reason or StopReason.DEADLINE
        result = Completion("", reason, False if opts.constrained else None, 0, times)
    else:
        times.prompt_read = time.perf_counter()
        with generation:
            result = Decoder(backend, opts, quotient, owed, stop, times).run(generation)
        if opts.mode == "checked":
            result = checked_prefix(result, left, right)
        result.healed = owed
        times.finished = time.perf_counter()
    result.timings = times.timings(len(prompt), result.tokens, result.parser_us)
    return result


class Decoder:
    """One generation's loop; holds its state so each piece of a step stays small."""

    def __init__(
        self,
        backend: Backend,
        options: DecodeOptions,
        quotient: Quotient | None,
        owed: str,
        stop: StopCheck,
        times: DecodeTimes,
    ) -> None:
        self.backend = backend
        self.opts = options
        self.constrained = options.constrained
        connect = options.stop_when_connected
        self.stop_when_connected = (not backend.has_fim) if connect is None else connect
        self.right_starts_line = quotient is not None and not first_line(quotient.right)
        self.vocab = backend.vocab_bytes
        self.end_ids = np.array(sorted(backend.eog_ids), dtype=np.intp)
        self.ranker = Ranker(options)
        self.stop = stop
        self.times = times
        self.owed = owed  # text token healing took out of the prompt, still to be written
        self.held = b""  # the bytes of a character not yet whole
        self.middle = ""
        self.state: QuotientState | None = quotient.initial if quotient is not None else None
        self.logprob = 0.0
        self.tokens = 0
        self.parser_us: list[float] = []
        self._parser_ns = 0  # time spent in the quotient during this step
        self.points = StoppingPoints()
        self.closing_from = (
            int(options.max_tokens * options.closing_share)
            if 0 < options.closing_share < 1 and options.closing_candidates > 0
            else None
        )
        self.closed = False  # the last token was chosen because it completes the middle

    # -- the loop -----------------------------------------------------------

    def run(self, generation: Generation) -> Completion:
        stop = self._loop(generation)
        self.times.stopped = time.perf_counter()
        middle, complete = self._outcome(stop)
        return Completion(middle, stop, complete, self.tokens, self.times, parser_us=self.parser_us)

    def _loop(self, generation: Generation) -> StopReason:
        while self.tokens < self.opts.max_tokens:
            if self.stop():
                return self.stop.reason or StopReason.CANCELLED
            # Connected, once the middle has text: a line complete as typed, the healed
            # token written back, is no suggestion.
            if self.stop_when_connected and self.middle and self._connected():
                return StopReason.CONNECTED
            chosen = self._choose(generation.ranking())
            if chosen is None:
                return StopReason.NO_VIABLE_TOKEN
            token, is_end = chosen
            if is_end:
                return StopReason.EOS
            self.tokens += 1
            if self.tokens == 1:
                self.times.first_token = time.perf_counter()
            if self.closed:
                return StopReason.CONNECTED
            try:
                generation.advance(token)
            except Interrupted:  # a backend that waits on others was cancelled meanwhile
                return self.stop.reason or StopReason.DEADLINE
        return StopReason.MAX_TOKENS

    def _outcome(self, stop: StopReason) -> tuple[str, bool | None]:
        """The middle to return and whether it is complete (None: not known)."""
        if self.constrained and self.state is not None:
            if stop in (StopReason.EOS, StopReason.CONNECTED):
                return self.middle, True
            return self.points.fallback(self.middle, self.held, self.state, self.stop)
        if stop == StopReason.EOS and self.held:
            return self.middle + self.held.decode("utf-8", errors="replace"), None
        return self.middle, None

    def _connected(self) -> bool:
        """The middle is complete and ends a line (see ``stop_when_connected``)."""
        if self.state is None or self.held:
            return False
        at_line_end = self.middle.endswith(("\n", "\r")) or self.right_starts_line
        return at_line_end and self.state.complete

    # -- one step -----------------------------------------------------------

    def _choose(self, ranking: TokenRanking) -> Choice:
        """Pick the next token; returns (token, is_end_of_generation) or None."""
        order = self._candidates(ranking)
        if not self.constrained:
            return self._model_choice(order)
        self._parser_ns = 0
        if not self.held:
            self._note_stopping_point(ranking)
        chosen = self._closing(order, ranking) if self._closing_due() else None
        if chosen is None:
            chosen = self._first_viable(order, ranking)
        self.parser_us.append(self._parser_ns / 1e3)
        return chosen

    def _candidates(self, ranking: TokenRanking) -> IdArray:
        """The tokens to try, in order: the top k; while token healing owes text or a
        character is unfinished, every token that can go on with it whatever its rank
        (found in the vocabulary's index), with the end tokens (and, for the model's
        own choice, the tokens without text)."""
        if not (self.owed or self.held):
            return self.ranker.order(ranking, self.opts.top_k)
        index = self.backend.token_index
        if self.owed:
            going_on = index.owing(self.owed.encode("utf-8")[len(self.held) :])
        else:
            going_on = index.continuing(self.held)
        others = self.end_ids if self.constrained else np.union1d(self.end_ids, index.empty)
        return self.ranker.order_among(ranking, np.union1d(going_on, others))

    def _model_choice(self, order: IdArray) -> Choice:
        """The model's own choice: the first candidate that keeps the healed prefix and
        the single-line rule (the top one, unless one of those rejects it)."""
        for token in order:
            tok = int(token)
            if self.backend.eog(tok):
                return tok, True
            got = self._text_of(tok)
            if got is None:
                continue
            self.middle += got[0]
            self.held, self.owed = got[1], got[2]
            return tok, False
        return None

    def _note_stopping_point(self, ranking: TokenRanking) -> None:
        """Remember the middle so far if it is complete and the best place to stop yet.

        Text still owed to token healing is the left context's own text, so it does not
        stand in the way of stopping.  The check is skipped where stopping could not beat
        the best point already found, which spares most checks once one exists.
        """
        assert self.state is not None
        score = (self.logprob + ranking.end_logprob()) / (self.tokens + 1)
        if self.points.could_improve(score):
            t0 = time.perf_counter_ns()
            done = self.state.complete
            self._parser_ns += time.perf_counter_ns() - t0
            if done:
                self.points.found(score, self.middle)

    def _first_viable(self, order: IdArray, ranking: TokenRanking) -> Choice:
        """The first candidate that keeps the middle viable, or an end token where the
        middle is complete."""
        state = self.state
        assert state is not None
        for token in order:
            tok = int(token)
            if self.backend.eog(tok):
                # A model that never sees the text after the cursor ends where it thinks
                # the file ends: right after the left context, that is no suggestion.
                if not self.held and (self.middle or not self.stop_when_connected):
                    t0 = time.perf_counter_ns()
                    done = state.complete
                    self._parser_ns += time.perf_counter_ns() - t0
                    if done:
                        return tok, True
                continue
            got = self._text_of(tok)
            if got is None:
                continue
            text, held, owed = got
            if not self.vocab[tok]:
                continue  # an empty token would loop without progress
            t0 = time.perf_counter_ns()
            new_state = state.feed(text) if text else state
            ok = new_state.viable
            if ok and held and not owed:
                ok = can_take_non_ascii(new_state)
            self._parser_ns += time.perf_counter_ns() - t0
            if ok:
                self._take(text, held, owed, new_state, ranking.logprob(tok))
                return tok, False
        return None

    def _closing_due(self) -> bool:
        """Half the budget (``closing_share``) is spent and the middle was never complete."""
        return (
            self.closing_from is not None
            and self.tokens >= self.closing_from
            and self.points.best is None
            and not self.owed
        )

    def _closing(self, order: IdArray, ranking: TokenRanking) -> Choice:
        """Take the best-ranked of the first few viable candidates that completes the
        middle, if there is one."""
        assert self.state is not None
        t0 = time.perf_counter_ns()
        closer = self._closing_candidate(order, self.state)
        self._parser_ns += time.perf_counter_ns() - t0
        if closer is None:
            return None
        tok, text, new_state = closer
        self._take(text, b"", "", new_state, ranking.logprob(tok))
        self.closed = True
        return tok, False

    def _closing_candidate(
        self, order: IdArray, state: QuotientState
    ) -> tuple[int, str, QuotientState] | None:
        viable = 0
        for token in order:
            tok = int(token)
            if self.backend.eog(tok) or not self.vocab[tok]:
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

    # -- taking a token -----------------------------------------------------

    def _text_of(self, token: int) -> tuple[str, bytes, str] | None:
        """(middle text, held bytes, owed text) after ``token``, or None."""
        return token_text(self.vocab[token], self.held, self.owed, self.opts.single_line)

    def _take(
        self, text: str, held: bytes, owed: str, new_state: QuotientState, logprob: float
    ) -> None:
        """Append a chosen token's text to the middle."""
        assert self.state is not None
        self.logprob += logprob
        self.points.passed(self.middle, self.state)  # the middle that ``state`` is for
        self.middle += text
        self.held, self.owed = held, owed
        self.state = new_state
