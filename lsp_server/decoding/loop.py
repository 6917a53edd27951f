"""The decoding loop: one syntax-checked token at a time, against any backend.

Each step asks the backend's generation for its ranking, orders the candidates
(:mod:`.ranking`), notes whether stopping here would be the best stopping point yet
(:mod:`.stopping`), and takes the first candidate whose text (:mod:`.text`) keeps the
middle viable, or an end token where the middle lands (is complete without turning
the code after the cursor into a comment: ``QuotientState.lands``).  Once the tokens left come
near the distance to a finish, steering (:mod:`.steering`) chooses instead; when no
candidate in the top k fits, the loop looks further down the ranking.  The backend then
advances by the chosen token.  Nothing here depends on how the backend computes its
ranking.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from lexer.text import first_line
from lsp_server.model.backend import Backend, Generation, IdArray, TokenRanking
from lsp_server.model.errors import Interrupted
from quotient_parser.quotient import Quotient, QuotientState

from .heuristic import HeuristicFilter
from .known_names import with_known_names
from .line_mode import own_line
from .options import DecodeOptions
from .ranking import Ranker
from .result import Completion, DecodeTimes
from .steering import Steering, dead_line_end, witness_ending
from .step import Choice
from .stop_reason import StopReason
from .stopping import RightEcho, StopCheck, StoppingPoints
from .text import breaks_only_at_end, can_take_non_ascii, heal_split, token_text

__all__ = ["Choice", "Decoder", "build_prompt", "resume"]

#: Candidates further down the ranking tried between two looks at the clock.
_CLOCK_EVERY = 16


def _breaks_line(data: bytes) -> bool:
    """Whether a token's bytes hold a line break."""
    return b"\n" in data or b"\r" in data


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
        context=options.project_context,
    )
    if not prompt:  # no FIM tokens, no BOS and nothing before the cursor
        prompt = backend.tokenize("\n")
    return prompt, owed


def resume(
    backend: Backend,
    quotient: Quotient,
    options: DecodeOptions,
    first: Completion,
    at: int,
    prepare: Callable[[Decoder], None],
    stop: StopCheck,
) -> Completion:
    """Decode on after the first ``at`` steps of ``first`` (an earlier generation of the
    same request, replayed without choosing; the model's cache still holds them), with
    ``prepare`` setting the decoder up for what it does differently from there (an
    alternative bans ``first``'s token, a restart steers at once).  ``first``'s prompt
    and healed text are the request's, built once."""
    times = DecodeTimes()
    prompt, owed = first.prompt, first.healed
    shared = first.token_ids[:at]
    start = quotient.free_initial if first.inside_fallback else quotient.initial
    decoder = Decoder(backend, options, quotient, owed, stop, times, start=start)
    try:
        generation = backend.start(prompt + shared, stop if stop.bounded else None)
    except Interrupted:
        return Completion("", stop.reason or StopReason.DEADLINE, False, 0, times)
    times.prompt_read = time.perf_counter()
    with generation:
        if not decoder.replay(shared, first.token_logprobs[:at]):
            return Completion("", StopReason.NO_VIABLE_TOKEN, False, 0, times)
        prepare(decoder)
        result = decoder.run(generation)
    result.healed, result.prompt = owed, prompt
    result.inside_fallback = first.inside_fallback
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
        *,
        start: QuotientState | None = None,
        rules: HeuristicFilter | None = None,
    ) -> None:
        self.backend = backend
        self.rules = rules  # heuristic mode's stops
        self.opts = options
        self.constrained = options.constrained
        connect = options.stop_when_connected
        self.stop_when_connected = (not backend.has_fim) if connect is None else connect
        self.right_starts_line = quotient is not None and not first_line(quotient.right)
        #: At a line's start before code the middle is lines of their own, each ending
        #: with its line break: no token may go on past a line break, so that every line
        #: end is a token boundary where the middle may stop.  Single-line, the middle
        #: ends with its first line break.
        self.own_line = quotient is not None and own_line(quotient)
        self.vocab = backend.vocab_bytes
        self.end_ids = np.array(sorted(backend.eog_ids), dtype=np.intp)
        self.ranker = Ranker(options)
        self.stop = stop
        self.times = times
        self.owed = owed  # text token healing took out of the prompt, still to be written
        self.held = b""  # the bytes of a character not yet whole
        self.middle = ""
        if start is None and quotient is not None:
            start = quotient.initial
        #: why ``knownNames`` is off for this file (None: on, or not asked for)
        self.names_off: str | None = None
        if start is not None and self.constrained and options.known_names:
            start, self.names_off = with_known_names(start)
        self.state: QuotientState | None = start
        self.logprob = 0.0
        self.tokens = 0
        self.parser_us: list[float] = []
        self._parser_ns = 0  # time spent in the quotient during this step
        self.points = StoppingPoints(likelihood=backend.has_fim)
        #: where the middle starts writing R's next line again (constrained only)
        self.echo = RightEcho(quotient.right, quotient.left) if quotient is not None else None
        self.echo_at: int | None = None  # the offset where it did
        self.line_ended = False  # single-line: a token ran over the line's end
        #: where the line the model was unsure of starts (``line_confidence``)
        self.unsure_at: int | None = None
        #: single-line: the text that ends the middle's line (see ``dead_line_end``)
        self._line_end_text = None if not options.single_line else "\n" if self.own_line else ""
        #: Steering aims at any finish the quotient knows, over lines; a line of its own
        #: ends only with its line break, which steering cannot write: there it would
        #: chase blanks.  Such a line that finds no end falls back to several lines.
        steer = self.constrained and options.steer and not (self.own_line and options.single_line)
        self.steering = Steering(self) if steer else None
        self.rescued = 0
        #: per step: the token taken, its log-probability, and its lead over the best
        #: other candidate (where an alternative would branch off)
        self.token_ids: list[int] = []
        self.token_logprobs: list[float] = []
        self.gaps: list[float] = []
        #: tokens not to take at a step (an alternative branching off there)
        self.banned: dict[int, frozenset[int]] = {}
        #: every step's point, under ``study_stops``
        self.stops: list[tuple[str, int, float, float, bool]] = []

    # -- the loop -----------------------------------------------------------

    def run(self, generation: Generation) -> Completion:
        stop = self._loop(generation)
        self.times.stopped = time.perf_counter()
        middle, complete, tokens = self._outcome(stop)
        logprob, scored = sum(self.token_logprobs[:tokens]), tokens
        witness = ""
        steering = self.steering
        if complete is False and self.opts.witness_ending and self.state is not None:
            known = None if steering is None else steering.known_witness(self.state)
            ending = witness_ending(self, generation, stop, known)
            if ending is not None:
                witness, more, more_scored = ending
                middle, complete, stop = self.middle + witness, True, StopReason.WITNESS
                logprob, scored = sum(self.token_logprobs) + more, len(self.token_logprobs)
                scored += more_scored
        return Completion(
            middle,
            stop,
            complete,
            self.tokens,
            self.times,
            parser_us=self.parser_us,
            logprob=logprob,
            scored_tokens=scored,
            steered=0 if steering is None else steering.steered,
            forced=0 if steering is None else steering.forced,
            rescued=self.rescued + (0 if steering is None else steering.rescued),
            witness=witness,
            steer_us=[] if steering is None else steering.spent_us,
            token_ids=self.token_ids,
            token_logprobs=self.token_logprobs,
            gaps=self.gaps,
            witnesses=[] if steering is None else steering.found,
            echo_step=self.echo_step if stop == StopReason.REPEATS_RIGHT else None,
            stops=self.stops,
            names_off=self.names_off,
        )

    def _loop(self, generation: Generation) -> StopReason:
        while self.tokens < self.opts.max_tokens:
            if self.stop():
                return self.stop.reason or StopReason.CANCELLED
            # Connected, once the middle has text: a line complete as typed, the healed
            # token written back, is no suggestion.
            if self.stop_when_connected and self.middle.strip() and self._connected():
                return StopReason.REPEATS_RIGHT if self._line_echoes() else StopReason.CONNECTED
            chosen = self._choose(generation.ranking())
            if self.steering is not None and self.steering.gave_up:
                return StopReason.MAX_TOKENS  # no candidate can finish within the budget
            if chosen is None:
                return StopReason.NO_VIABLE_TOKEN
            token, is_end = chosen
            if is_end and self.line_ended:
                self.tokens += 1  # the token that ended the line, up to its line break
                return StopReason.REPEATS_RIGHT if self._line_echoes() else StopReason.CONNECTED
            if is_end:
                return StopReason.EOS
            self.tokens += 1
            if self.tokens == 1:
                self.times.first_token = time.perf_counter()
            if self.steering is not None and self.steering.finished:
                return StopReason.STEERED
            if self.constrained and not self.opts.study_stops:
                if self._echoes(token):
                    return StopReason.REPEATS_RIGHT
                ended = self._extension_ends(token)
                if ended is not None:
                    return ended
                # (at the token limit the limit is the reason, whatever the bound says)
                if self.tokens < self.opts.max_tokens and self.points.settled(self.logprob):
                    return StopReason.LIKELIEST_END
            if self.rules is not None and (cut := self.rules.cut(self.middle)) is not None:
                self.middle = self.middle[:cut]
                return StopReason.HEURISTIC_CUT
            try:
                generation.advance(token)
            except Interrupted:  # a backend that waits on others was cancelled meanwhile
                return self.stop.reason or StopReason.DEADLINE
        return StopReason.MAX_TOKENS

    def _echoes(self, token: int) -> bool:
        """The token just taken ends a line that writes R's next line of code again."""
        if self.echo is None or not _breaks_line(self.vocab[token]):
            return False
        self.echo_at = self.echo.start(self.middle)
        if self.echo_at is not None:
            self._note_cut(self._before_echo(self.echo_at))
            return True
        self.echo_at = self.echo.tail(self.middle)
        if self.echo_at is not None:
            self._note_cut(self.echo_at)
        return self.echo_at is not None

    def _before_echo(self, offset: int) -> int:
        """Where the middle ends before a whole-line echo of R starting at ``offset``:
        after its last line of code and the one line break that ends it (none where R
        starts with a line break of its own), not the blank lines before the echo."""
        text = self.middle[:offset]
        code_end = len(text.rstrip())
        if self.right_starts_line:
            return code_end
        breaks = [i for i in (text.find("\n", code_end), text.find("\r", code_end)) if i >= 0]
        if not breaks:
            return offset
        first = min(breaks)
        return first + (2 if text.startswith("\r\n", first) else 1)

    def _extension_ends(self, token: int) -> StopReason | None:
        """Where an extension (``line_confidence`` set: ``extend.py``) ends: the token just
        taken ends a line after the middle's first that the model was unsure of (its
        tokens' mean log-probability below ``line_confidence``: ``UNSURE_LINE``) or that
        nearly restates one of R's next lines of code (``RightEcho.restates``:
        ``REPEATS_RIGHT``), with a complete middle before that line, where it ends."""
        floor = self.opts.line_confidence
        if floor is None or not _breaks_line(self.vocab[token]):
            return None
        earlier = range(len(self.token_ids) - 2, -1, -1)  # the tokens before this one
        before = next((i for i in earlier if _breaks_line(self.vocab[self.token_ids[i]])), None)
        if before is None:
            return None  # the middle's first line
        body = self.middle.rstrip("\r\n")
        start = max(body.rfind("\n"), body.rfind("\r")) + 1
        line = body[start:]
        if not line.strip() or self.points.best_within(start) is None:
            return None
        if self.echo is not None and self.echo.restates(line):
            self.echo_at = start
            return StopReason.REPEATS_RIGHT
        logprobs = self.token_logprobs[before + 1 :]
        if sum(logprobs) / len(logprobs) < floor:
            self.unsure_at = start
            return StopReason.UNSURE_LINE
        return None

    def _note_cut(self, offset: int) -> None:
        """The middle cut at ``offset``, before an echo of R, as a stopping point scored
        with the log-probability through the echo, which stands for the end."""
        text = self.middle[:offset]
        if not text.strip() or not self.points.could_improve(self.logprob):
            return
        t0 = time.perf_counter_ns()
        cut = self.points.cut_at(self.middle, offset)
        landed = cut is not None and cut[1].lands
        self._parser_ns += time.perf_counter_ns() - t0
        if cut is not None and landed:
            self.points.found(self.logprob, text, cut[0])

    def _line_echoes(self) -> bool:
        """The middle, ending here at a line's end, ends with R's next line of code."""
        if self.echo is None or not self.constrained:
            return False
        whole = self.middle if self.middle.endswith(("\n", "\r")) else self.middle + "\n"
        self.echo_at = self.echo.start(whole)
        return self.echo_at is not None

    @property
    def echo_step(self) -> int | None:
        """The step whose token began the echo's text (its first character after the
        indentation): another token there is a middle that does not repeat R."""
        if self.echo_at is None:
            return None
        line = self.middle[self.echo_at :]
        return self.points.tokens_before(self.echo_at + len(line) - len(line.lstrip()))

    def _outcome(self, stop: StopReason) -> tuple[str, bool | None, int]:
        """The middle to return, whether it is complete (None: not known) and how many
        of the tokens it holds."""
        if self.constrained and self.state is not None:
            if stop in (StopReason.EOS, StopReason.CONNECTED, StopReason.STEERED):
                return self.middle, True, self.tokens
            if stop == StopReason.LIKELIEST_END and self.points.best is not None:
                return self.points.best[1], True, self.points.best[2]
            if stop == StopReason.UNSURE_LINE and self.unsure_at is not None:
                point = self.points.best_within(self.unsure_at)
                assert point is not None  # ``_extension_ends`` stops only where there is one
                return point[1], True, point[2]
            if stop == StopReason.REPEATS_RIGHT and self.echo_at is not None:
                point = self.points.best_within(self.echo_at)
                if point is None:  # no complete middle before the echo
                    return "", False, 0
                return point[1], True, point[2]
            return self.points.fallback(self.middle, self.held, self.state, self.tokens, self.stop)
        if stop == StopReason.EOS and self.held:
            return self.middle + self.held.decode("utf-8", errors="replace"), None, self.tokens
        return self.middle, None, self.tokens

    def _connected(self) -> bool:
        """The middle is complete and ends a line (see ``stop_when_connected``)."""
        if self.state is None or self.held:
            return False
        at_line_end = self.middle.endswith(("\n", "\r")) or self.right_starts_line
        return at_line_end and self.state.lands

    def replay(self, tokens: Sequence[int], logprobs: Sequence[float]) -> bool:
        """Take ``tokens`` (the start of an earlier generation of the same request, with
        their log-probabilities) without choosing: where an alternative branches off.
        Their boundaries are no stopping points.  False if one cannot be taken."""
        for token, logprob in zip(tokens, logprobs):
            got = self.text_of(token)
            if got is None or self.state is None:
                return False
            text, held, owed = got
            new_state = self.state.feed(text) if text else self.state
            if not new_state.viable:
                return False
            self._take(token, text, held, owed, new_state, logprob, boundary=False)
            self.tokens += 1
        self.points.offset = self.tokens
        return True

    # -- one step -----------------------------------------------------------

    def _choose(self, ranking: TokenRanking) -> Choice:
        """Pick the next token; returns (token, is_end_of_generation) or None."""
        order = self._candidates(ranking)
        if not self.constrained:
            return self._model_choice(order, ranking)
        self._parser_ns = 0
        if not self.held:
            self._note_stopping_point(ranking)
        chosen = None if self.steering is None else self.steering.choose(order, ranking)
        if chosen is None and not (self.steering is not None and self.steering.gave_up):
            chosen = self._first_viable(order, ranking)
            if chosen is None:
                chosen = self._further_down(order, ranking)
        if chosen is not None and not chosen[1]:
            self._check_next_stop()
        self.parser_us.append(self._parser_ns / 1e3)
        return chosen

    def _check_next_stop(self) -> None:
        """Tell now whether the middle just extended is complete, when the next step's
        stopping point is sure to ask (no point found yet, no character unfinished).

        The answer is the same either way; asked now, the parser's tables are still in
        the processor's caches, which the model's next evaluation (over the whole
        vocabulary's output matrix) empties: the same check costs several times more
        at the start of the next step.
        """
        if self.points.best is None and not self.held and self.state is not None:
            t0 = time.perf_counter_ns()
            _ = self.state.lands
            self._parser_ns += time.perf_counter_ns() - t0

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

    def _model_choice(self, order: IdArray, ranking: TokenRanking) -> Choice:
        """The model's own choice: the first candidate that keeps the healed prefix and
        the single-line rule (the top one, unless one of those rejects it)."""
        for token in order:
            tok = int(token)
            if self.backend.eog(tok):
                return tok, True
            got = self.text_of(tok)
            if got is None:
                continue
            self.middle += got[0]
            self.held, self.owed = got[1], got[2]
            self.token_ids.append(tok)  # for the log-probability of the middle
            self.token_logprobs.append(ranking.logprob(tok))
            return tok, False
        return None

    def _note_stopping_point(self, ranking: TokenRanking) -> None:
        """Remember the middle so far if it is complete and the best place to stop yet.

        Text still owed to token healing is the left context's own text, so it does not
        stand in the way of stopping.  The check is skipped where stopping could not beat
        the best point already found, which spares most checks once one exists.
        """
        assert self.state is not None
        if not self.middle.strip():
            return  # blanks alone are no suggestion
        end_logprob = ranking.end_logprob()
        if self.opts.study_stops:
            t0 = time.perf_counter_ns()
            done = self.state.lands
            self._parser_ns += time.perf_counter_ns() - t0
            self.stops.append((self.middle, self.tokens, self.logprob, end_logprob, done))
        score = self.points.score(self.logprob, end_logprob, self.tokens)
        if self.points.could_improve(score):
            t0 = time.perf_counter_ns()
            done = self.state.lands
            self._parser_ns += time.perf_counter_ns() - t0
            if done:
                self.points.found(score, self.middle, self.tokens)

    def _first_viable(
        self, order: IdArray, ranking: TokenRanking, until: float | None = None
    ) -> Choice:
        """The first candidate that keeps the middle viable, or an end token where the
        middle is complete (``until``: a ``perf_counter`` time to give up at)."""
        state = self.state
        assert state is not None
        banned = self.banned_here()
        for index, token in enumerate(order):
            tok = int(token)
            if until is not None and index % _CLOCK_EVERY == 0 and time.perf_counter() > until:
                return None
            if tok in banned:
                continue
            if self.backend.eog(tok):
                # Ending before the middle has text is no suggestion (and a model that
                # never sees the text after the cursor ends where the file would end).
                if not self.held and self.middle.strip():
                    t0 = time.perf_counter_ns()
                    done = state.lands
                    self._parser_ns += time.perf_counter_ns() - t0
                    if done:
                        return tok, True
                continue
            got = self.text_of(tok)
            if got is None:
                t0 = time.perf_counter_ns()
                ending = self._line_end(tok, state)
                self._parser_ns += time.perf_counter_ns() - t0
                if ending is not None:
                    self.take(tok, ending[0], b"", "", ending[1], ranking, order)
                    self.line_ended = True
                    return tok, True
                continue
            text, held, owed = got
            if not self.vocab[tok]:
                continue  # an empty token would loop without progress
            t0 = time.perf_counter_ns()
            new_state = state.feed(text) if text else state
            ok = new_state.viable
            if ok and held and not owed:
                ok = can_take_non_ascii(new_state)
            if ok and text:
                ok = not dead_line_end(state, new_state, self._line_end_text)
            self._parser_ns += time.perf_counter_ns() - t0
            if ok:
                self.take(tok, text, held, owed, new_state, ranking, order)
                return tok, False
        return None

    def banned_here(self) -> frozenset[int]:
        """Tokens not to take at this step (an alternative branching off here)."""
        return self.banned.get(self.tokens, frozenset())

    def further_order(self, order: IdArray, ranking: TokenRanking) -> IdArray:
        """Up to ``further_down`` candidates below those of ``order``, most likely first
        (none when ``order`` already holds the whole vocabulary)."""
        extra = self.opts.further_down
        if extra <= 0 or len(order) >= len(self.vocab):
            return order[:0]
        ranked = ranking.best(len(order) + extra)
        further: IdArray = ranked[~np.isin(ranked, order)]
        return further

    def _further_down(self, order: IdArray, ranking: TokenRanking) -> Choice:
        """No candidate of the top k fits: the first that does further down the model's
        ranking, within ``further_down_ms`` (the paper's suggestion [31])."""
        further = self.further_order(order, ranking)
        if not len(further):
            return None
        until = time.perf_counter() + self.opts.further_down_ms / 1e3
        chosen = self._first_viable(further, ranking, until)
        if chosen is not None:
            self.rescued += 1
        return chosen

    # -- taking a token -----------------------------------------------------

    def text_of(self, token: int) -> tuple[str, bytes, str] | None:
        """(middle text, held bytes, owed text) after ``token``, or None."""
        single = self.opts.single_line
        got = token_text(self.vocab[token], self.held, self.owed, single)
        if got is not None and self.own_line and not single and not breaks_only_at_end(got[0]):
            return None  # lines of their own: every line end a token boundary
        return got

    def _line_end(self, token: int, state: QuotientState) -> tuple[str, QuotientState] | None:
        """Single-line: a token that runs over the end of the line ends the middle there,
        where it lands ((the text it adds, the state after it), else None).  The text
        stops before the line break, or after it for a line of its own."""
        if not self.opts.single_line or self.held or self.owed:
            return None
        got = token_text(self.vocab[token], b"", "", False)
        if got is None or got[1]:
            return None
        text = got[0]
        cut = next((i for i, c in enumerate(text) if c in "\r\n"), None)
        if cut is None:
            return None
        if self.own_line:
            cut += 2 if text.startswith("\r\n", cut) else 1
        head = text[:cut]
        if not (self.middle + head).strip():
            return None
        new_state = state.feed(head) if head else state
        return (head, new_state) if new_state.lands else None

    def take(
        self,
        token: int,
        text: str,
        held: bytes,
        owed: str,
        new_state: QuotientState,
        ranking: TokenRanking,
        order: IdArray,
    ) -> None:
        """Take a candidate chosen from ``order`` (best first) at this step."""
        logprob = ranking.logprob(token)
        gap = float("inf")  # its lead over the best other candidate
        for other in order[:2]:
            if int(other) != token:
                gap = logprob - ranking.logprob(int(other))
                break
        self._take(token, text, held, owed, new_state, logprob, gap)

    def _take(
        self,
        token: int,
        text: str,
        held: bytes,
        owed: str,
        new_state: QuotientState,
        logprob: float,
        gap: float = float("inf"),
        *,
        boundary: bool = True,
    ) -> None:
        """Append a token's text to the middle (``boundary``: the middle before it is a
        place to stop at)."""
        assert self.state is not None
        self.logprob += logprob
        if boundary:
            self.points.passed(self.middle, self.state)  # the middle that ``state`` is for
        self.middle += text
        self.held, self.owed = held, owed
        self.state = new_state
        self.token_ids.append(token)
        self.token_logprobs.append(logprob)
        self.gaps.append(gap)
