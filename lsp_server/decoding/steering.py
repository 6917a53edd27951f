"""Steering: spend the token budget knowing how far the middle is from a finish.

The quotient tells, from any state, a lower bound on the characters a finish still
needs (``QuotientState.distance()``, ``quotient_parser/finish.py``).  Converted to
tokens with the model's characters per token on finishing text, it says when the
budget runs short.  While tokens remain the loop follows the model; once the tokens
left come within ``STEER_MARGIN`` of what a finish needs, each step takes, in the
model's order, the first candidate that shortens the distance and keeps a finish
within the tokens then left, else the first that keeps one; when the middle becomes
complete that way, generation stops there (``StopReason.STEERED``).  Candidates
further down the ranking are weighed when none of the top k will do.  A finish at
hand is taken earlier: from half the budget on, while the middle has never been
complete, a step takes one of its first few viable candidates that completes it.
While steering is far from due, the distance is looked at again only after a quarter of the tokens
to spare (``RECHECK_SHARE``), which keeps its cost off most steps.

The lower bound is loose where a finish must end the statement at the cursor and
begin the one R's first line needs, so near the end of the budget steering also asks
for a witness (``QuotientState.witness``, bounded by ``WITNESS_NODES`` states; after
``WITNESS_MISSES`` searches that found none, no more are made): its
length in the model's tokens is an upper bound on what a finish needs, and steering
is due when the tokens left come within ``STEER_MARGIN`` of the larger of the two.
With a witness, each steering step takes, in the model's order, the first candidate
whose text begins the witness's (what is left of it stays the witness of the next
step, so it is searched once): from the top k, then further down the ranking; where
the only one splits a word or a run of blanks (the model may rank only ``c`` of
``cla``, and a split costs a token the end of the budget rarely has), the witness's
own first token as the vocabulary writes it instead; only without one does the lower
bound choose.  Where none of the model's candidates keeps a finish within reach and
witness endings are allowed, the witness's own first token is the last resort.  A
token that the model did not rank among its candidates is counted as forced
(``Completion.forced``): such a middle is not wholly the model's.

A candidate that opens a comment or a backslash continuation after which no line
break can come (``from x #``) is never taken (``dead_line_end``): the quotient's
viability, a left-prefix test, would let the model write such a comment to the end
of the budget.

When no candidate can finish within the budget, the middle stays the model's and the
loop goes on (the best complete stopping point is returned), unless witness endings
are allowed (``DecodeOptions.witness_ending``): then generation ends with the
shortest finish the quotient finds (``QuotientState.witness``), scored under the
model so that its log-probability counts (``StopReason.WITNESS``).

This replaces "closing", which looked for a one-token finish once half the budget
was spent: steering starts when the distance says so, works over several tokens,
and knows when no finish is left within reach.
"""

from __future__ import annotations

import contextlib
import math
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from lexer.text import is_word_char
from lsp_server.model.backend import Backend, Generation, IdArray, TokenRanking
from lsp_server.model.errors import Interrupted, ModelError
from quotient_parser.finish import comment_or_continuation

from .step import Choice, StepView
from .stop_reason import StopReason

if TYPE_CHECKING:
    from quotient_parser.quotient import QuotientState


__all__ = [
    "STEER_MARGIN",
    "Steering",
    "dead_line_end",
    "finish_chars_per_token",
    "witness_ending",
]

#: Tokens of slack: steering starts when the tokens left are at most what a finish
#: needs plus this many (the distance is a lower bound and the model's tokens rarely
#: all shorten it).
STEER_MARGIN = 3
#: Finishes at hand: once this share of the budget is spent and the middle has never
#: been complete, a step takes, among its first ``CLOSE_CANDIDATES`` viable candidates
#: in the model's order, one after which the middle is complete, and stops there.
CLOSE_SHARE = 0.5
CLOSE_CANDIDATES = 8
#: While steering is far from due, the distance is looked at again only after this
#: share of the tokens to spare (a token rarely moves a finish by many tokens; the
#: bound costs about as much as the parser's own step).
RECHECK_SHARE = 0.25
#: Finishes as the quotient's witnesses write them on the standard library's cuts
#: (closers, a name, a line break and the indentation of an open block): the text
#: whose characters per token convert a distance into tokens for a model.
FINISH_SAMPLE = (
    ")", "):", ")]", "])", "}", ")\n", "'", '")', '"""\n', ":", ",", "x)", "((",
    "\n", "\n    ", "        (", "           try:", "\nif x:", " in x:", ":x\n",
    "x\n", " else x", "]]]", "):\n        pass\n", "x%", "->x:",
)  # fmt: skip
#: Steering asks for a witness (an upper bound on what a finish needs, and a path
#: to one) once the tokens to spare by the lower bound are at most this many.
WITNESS_HORIZON = 8
#: A steering witness search's bound in states expanded (what makes the answer the
#: same on any machine and under any load), and its safety cap in time (also the
#: request's deadline).
WITNESS_NODES = 300
WITNESS_STEER_SECONDS = 1.5
#: Searches that found no witness after which a generation asks for none again (the
#: cut is one the search cannot finish; the lower bound steers alone from then on).
WITNESS_MISSES = 2
#: Time a witness ending may search (also bounded by the deadline).
WITNESS_SECONDS = 0.3
#: Tokens of a witness ending scored under the model at most.
WITNESS_SCORED_TOKENS = 24

_CHARS_PER_TOKEN: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()


def finish_chars_per_token(backend: Backend) -> float:
    """Characters per token of ``backend``'s tokenizer on finishing text (measured once
    per backend on ``FINISH_SAMPLE``; at least 1)."""
    try:
        known = _CHARS_PER_TOKEN.get(backend)
    except TypeError:  # a backend that cannot be weakly referenced
        known = None
    if known is not None:
        return known
    chars = tokens = 0
    for text in FINISH_SAMPLE:
        ids = backend.tokenize(text)
        if ids:
            chars += len(text)
            tokens += len(ids)
    measured = max(1.0, chars / tokens) if tokens else 1.0
    with contextlib.suppress(TypeError):
        _CHARS_PER_TOKEN[backend] = measured
    return measured


class Steering:
    """A decoder's steering: when to steer, which candidate to take, and counts."""

    def __init__(self, decoder: StepView) -> None:
        self.decoder = decoder
        self.chars_per_token = finish_chars_per_token(decoder.backend)
        #: tokens taken that were not the model's first viable choice
        self.steered = 0
        #: steps whose token came from further down the ranking than the top k
        self.rescued = 0
        #: tokens taken that the model ranked nowhere among its candidates (the witness's
        #: own first token): a middle with one is not wholly the model's
        self.forced = 0
        #: the middle became complete while steering: stop there
        self.finished = False
        #: no candidate can finish within the budget and witness endings are allowed
        self.gave_up = False
        #: time spent deciding, per step (microseconds; one per step, like the parser's)
        self.spent_us: list[float] = []
        #: the step before which the distance need not be looked at again
        self._next_look = 0
        #: the last witness asked for: (the state, its finish or None)
        self._witness: tuple[QuotientState, str | None] | None = None
        self._misses = 0  # witness searches that found nothing since the last line break
        self._miss_lines = 0  # line breaks in the middle at the last miss
        #: (step, finish) of every witness found: where a restart may begin (``restart.py``)
        self.found: list[tuple[int, str]] = []
        #: steer at every step from now on, whatever the budget says (a restart)
        self.urgent = False

    def steer_now(self, witness: str | None) -> None:
        """Steer from this step on, following ``witness`` (a finish of the decoder's
        state, or None to search for one): a restart, after the model's own way from
        here ran out of budget (``restart.py``)."""
        self.urgent = True
        if witness is not None and self.decoder.state is not None:
            self._witness = (self.decoder.state, witness)

    def need(self, distance: int) -> int:
        """Tokens a finish of at least ``distance`` characters is expected to take."""
        return math.ceil(distance / self.chars_per_token)

    def choose(self, order: IdArray, ranking: TokenRanking) -> Choice:
        """The token steering takes at this step, or None to let the model choose (not
        due, or nothing fits; ``gave_up`` tells the latter when it ends generation)."""
        dec = self.decoder
        t0 = time.perf_counter_ns()
        try:
            if dec.owed or dec.held or dec.state is None:
                return None  # the healed text and whole characters come first
            return self._choose(dec.state, order, ranking)
        finally:
            self.spent_us.append((time.perf_counter_ns() - t0) / 1e3)

    def _choose(self, state: QuotientState, order: IdArray, ranking: TokenRanking) -> Choice:
        dec = self.decoder
        if dec.points.best is not None:
            # The middle has landed before: that stopping point is returned unless the
            # model ends better, so the model goes on unsteered (a finish forced at the
            # end of the budget would replace a likelier, usually shorter, middle).
            return None
        if dec.tokens >= dec.opts.max_tokens * CLOSE_SHARE:
            closer = self._close(state, order, ranking)
            if closer is not None:
                return closer
        if dec.tokens < self._next_look and not self.urgent:
            return None
        left = dec.opts.max_tokens - dec.tokens  # this step's token included
        distance = state.distance(natural=True)
        need = self.need(distance)
        witness = None
        if self.urgent or left - need - STEER_MARGIN <= WITNESS_HORIZON:
            witness = self.witness(state)
            if witness is not None:
                need = max(need, self.witness_tokens(witness))
        spare = left - need - STEER_MARGIN
        if spare > 0 and not self.urgent:
            self._next_look = dec.tokens + int(spare * RECHECK_SHARE)
            return None
        chosen = None
        if witness:  # an empty one: the middle is complete, an end token comes first
            chosen = self._follow_witness(state, witness, left - 1, order, ranking)
            if chosen is not None:
                return chosen
        chosen = self._weigh(state, distance, left - 1, order, ranking)
        if chosen is None:
            further = dec.further_order(order, ranking)
            chosen = self._weigh(state, distance, left - 1, further, ranking, within_ms=True)
            if chosen is None and witness and dec.opts.witness_ending:
                # none of the model's candidates keeps a finish within reach: where the
                # user allows a witness's text, its start as the vocabulary writes it
                # (the closing quote R's string needs, with one token left), forced
                chosen = self._follow_own(state, witness, left - 1, ranking)
            if chosen is not None:
                self.rescued += 1
        if chosen is None:
            self.gave_up = dec.opts.witness_ending
        return chosen

    def witness(self, state: QuotientState) -> str | None:
        """A finish of ``state`` (the rest of the one steering follows, or a new search
        bounded by ``WITNESS_NODES``); None when none is found."""
        known = self._witness
        if known is not None and known[0] is state:
            return known[1]
        lines = self.decoder.middle.count("\n")
        if self._misses >= WITNESS_MISSES and lines == self._miss_lines:
            return None
        seconds = WITNESS_STEER_SECONDS
        deadline = self.decoder.stop.deadline
        if deadline is not None:
            seconds = max(0.0, min(seconds, deadline - time.perf_counter()))
        found = state.witness(max_nodes=WITNESS_NODES, max_seconds=seconds)
        self._witness = (state, found.text)
        if found.text is not None:
            self.found.append((self.decoder.tokens, found.text))
        else:
            # a new line starts a new statement, where finishes across its end are
            # short again: the count starts afresh there
            self._misses = 1 if lines != self._miss_lines else self._misses + 1
            self._miss_lines = lines
        return found.text

    def known_witness(self, state: QuotientState) -> str | None:
        """The finish steering last found for ``state``, if it asked for that state."""
        known = self._witness
        return known[1] if known is not None and known[0] is state else None

    def witness_tokens(self, text: str) -> int:
        """Tokens the model's vocabulary writes ``text`` in (an upper bound on what a
        finish needs from here)."""
        return len(self.decoder.backend.tokenize(text)) if text else 0

    def _follow_witness(
        self,
        state: QuotientState,
        witness: str,
        after: int,
        order: IdArray,
        ranking: TokenRanking,
    ) -> Choice:
        """A candidate that follows ``witness`` (``_follow``), in the top k, then further
        down the model's ranking.  Where the only one that follows splits a word or a
        run of blanks (``r`` of ``raise("``, ``c`` of ``cla``), the witness's own first
        token (the vocabulary's way to write that start) is taken instead when it
        follows: the model rarely ranks the piece that would complete the split, and
        near the end of the budget the extra token is rarely there.  Where nothing
        follows, the lower bound chooses among the model's candidates first (they may
        name what the witness writes as ``x``); the own token comes last (``_choose``)."""
        dec = self.decoder
        further = dec.further_order(order, ranking)
        for candidates, rescue in ((order, False), (further, True)):
            chosen = self._follow(state, witness, after, candidates, ranking, splits=False)
            if chosen is None and self._split_follows(witness, candidates):
                chosen = self._follow_own(state, witness, after, ranking)
                rescue = rescue or chosen is not None
                if chosen is None:
                    chosen = self._follow(state, witness, after, candidates, ranking)
            if chosen is not None:
                self.rescued += rescue
                return chosen
        return None

    def _split_follows(self, witness: str, candidates: IdArray) -> bool:
        """Whether a candidate's text begins ``witness`` and ends inside a word or a run
        of blanks that the witness goes on with (not fed: text alone)."""
        return any(
            witness.startswith(text) and _splits_run(text, witness[len(text) :])
            for _tok, text in self._whole_texts(candidates)
        )

    def _follow_own(
        self, state: QuotientState, witness: str, after: int, ranking: TokenRanking
    ) -> Choice:
        """The witness's own first token taken, where it follows (``_follow``; None where
        the ranking stays at the top k, ``further_down`` 0)."""
        dec = self.decoder
        if dec.opts.further_down <= 0:
            return None
        own = np.asarray(dec.backend.tokenize(witness)[:1], dtype=np.intp)
        chosen = self._follow(state, witness, after, own, ranking, splits=False)
        if chosen is not None:
            self.steered += 1  # the model ranked it nowhere near: never its first choice
            self.forced += 1
        return chosen

    def _follow(
        self,
        state: QuotientState,
        witness: str,
        after: int,
        order: IdArray,
        ranking: TokenRanking,
        splits: bool = True,
    ) -> Choice:
        """The first candidate, in the model's order, whose text begins the finish
        ``witness`` (or writes it whole and completes the middle) and leaves a rest that
        the ``after`` tokens then left can write (' ' then 'x(' needs one more than ' x'
        then '('); what is left of the witness stays known for the next step.

        A candidate that ends inside a word or a run of blanks of the witness (``c``
        of ``cla``, 12 of 20 spaces) is taken only where no other follows (and never
        without ``splits``): the model rarely ranks the piece that would complete
        such a split."""
        first_viable: int | None = None
        split: tuple[int, str, QuotientState, str] | None = None
        for tok, text in self._whole_texts(order):
            follows = witness.startswith(text)
            writes_it = not follows and text.startswith(witness)
            if not (follows or writes_it or first_viable is None):
                continue  # fed only to follow the witness or to find the first viable
            new_state = state.feed(text)
            if not new_state.viable:
                continue
            if first_viable is None:
                first_viable = tok
            if follows:
                rest = witness[len(text) :]
                if self.witness_tokens(rest) > after:
                    continue
                if _splits_run(text, rest):
                    if split is None and splits:
                        split = (tok, text, new_state, rest)
                    continue
                self._witness = (new_state, rest)
                return self._take(tok, text, new_state, ranking, order, first_viable)
            if writes_it and new_state.lands:
                return self._take(tok, text, new_state, ranking, order, first_viable)
        if split is None:
            return None
        tok, text, new_state, rest = split
        self._witness = (new_state, rest)
        return self._take(tok, text, new_state, ranking, order, first_viable)

    def _whole_texts(self, order: IdArray) -> Iterator[tuple[int, str]]:
        """The candidates of ``order`` not banned at this step that write text and leave
        no character incomplete, with their text."""
        dec = self.decoder
        banned = dec.banned_here()
        for token in order:
            tok = int(token)
            if tok in banned or dec.backend.eog(tok) or not dec.vocab[tok]:
                continue
            got = dec.text_of(tok)
            if got is not None and not got[1] and got[0]:
                yield tok, got[0]

    def _close(self, state: QuotientState, order: IdArray, ranking: TokenRanking) -> Choice:
        """The first of the first few viable candidates after which the middle is
        complete, taken (None: none of them)."""
        viable = 0
        first_viable: int | None = None
        for tok, text in self._whole_texts(order):
            new_state = state.feed(text)
            if not new_state.viable:
                continue
            if first_viable is None:
                first_viable = tok
            if new_state.lands:
                return self._take(tok, text, new_state, ranking, order, first_viable)
            viable += 1
            if viable >= CLOSE_CANDIDATES:
                break
        return None

    def _weigh(
        self,
        state: QuotientState,
        distance: int,
        after: int,
        order: IdArray,
        ranking: TokenRanking,
        within_ms: bool = False,
    ) -> Choice:
        """Among ``order``, in the model's order: an end token where the middle is
        complete, else the first candidate that shortens the distance and leaves a
        finish within ``after`` tokens, else the first that leaves one (``within_ms``:
        give up after the options' ``further_down_ms``)."""
        dec = self.decoder
        banned = dec.banned_here()
        stop_at = time.perf_counter() + dec.opts.further_down_ms / 1e3 if within_ms else None
        fallback: tuple[int, str, QuotientState] | None = None
        first_viable: int | None = None
        for index, token in enumerate(order):
            tok = int(token)
            if stop_at is not None and index % 16 == 0 and time.perf_counter() > stop_at:
                break
            if tok in banned:
                continue
            if dec.backend.eog(tok):
                if distance == 0 and dec.middle.strip():
                    return tok, True
                continue
            got = dec.text_of(tok)
            if got is None or got[1] or not got[0] or not dec.vocab[tok]:
                continue  # no text, or a character left incomplete: not measurable
            new_state = state.feed(got[0])
            if not new_state.viable:
                continue
            if first_viable is None:
                first_viable = tok
            # no finish through a comment or continuation the middle opens is worth
            # aiming at where R's first line may be code (asked once per right context)
            if _opens_comment(state, new_state) and state.quotient.right_line_can_be_code:
                continue
            new_distance = new_state.distance(natural=True)
            if self.need(new_distance) > after:
                continue
            if new_distance < distance:
                return self._take(tok, got[0], new_state, ranking, order, first_viable)
            if fallback is None:
                fallback = (tok, got[0], new_state)
        if fallback is None:
            return None
        tok, text, new_state = fallback
        return self._take(tok, text, new_state, ranking, order, first_viable)

    def _take(
        self,
        tok: int,
        text: str,
        new_state: QuotientState,
        ranking: TokenRanking,
        order: IdArray,
        first_viable: int | None,
    ) -> Choice:
        if tok != first_viable:
            self.steered += 1
        self.decoder.take(tok, text, b"", "", new_state, ranking, order)
        if new_state.lands and self.decoder.middle.strip():
            self.finished = True
        return tok, False


def _splits_run(text: str, rest: str) -> bool:
    """Whether ``text`` ends inside a word or a run of blanks that ``rest`` goes on."""
    if not text or not rest:
        return False
    last, first = text[-1], rest[0]
    if last in " \t":
        return first in " \t"
    return is_word_char(last) and is_word_char(first)


def _opens_comment(before: QuotientState, after: QuotientState) -> bool:
    """Whether the step from ``before`` to ``after`` opened a comment or a backslash
    continuation (which would swallow R's first line or join it to this one)."""
    lex = after.state.lex
    if lex is None or not comment_or_continuation(lex.pending):
        return False
    previous = before.state.lex
    return previous is None or not comment_or_continuation(previous.pending)


def dead_line_end(before: QuotientState, after: QuotientState, line_end: str | None = None) -> bool:
    """Whether the step from ``before`` to ``after`` opened a comment or a backslash
    continuation that nothing can follow: only a line break may come next, and the
    middle cannot take one (``from x #...``), nor does it land there (complete with
    R's first line blank: ``QuotientState.lands``).  The quotient's viability, a
    left-prefix test, does not see this.  ``line_end``: a single-line middle must end
    its line with this text ("" on the cursor's line, the line break for a line of its
    own), so the comment is dead unless the middle lands with it."""
    if not _opens_comment(before, after):
        return False
    if line_end is not None:
        return not (after.feed(line_end) if line_end else after).lands
    return not after.feed("\n").viable and not after.lands


def witness_ending(
    decoder: StepView, generation: Generation, stop: StopReason, known: str | None
) -> tuple[str, float, int] | None:
    """The shortest finish of the decoder's middle (``known``: one steering found
    already), and its log-probability under the model and how many of its tokens that
    covers; None when none is found in time (or the request was cancelled)."""
    state = decoder.state
    if state is None or stop == StopReason.CANCELLED:
        return None
    seconds = WITNESS_SECONDS
    if decoder.stop.deadline is not None:
        seconds = min(seconds, decoder.stop.deadline - time.perf_counter())
    if seconds <= 0:
        return None
    text = known if known is not None else state.witness(max_seconds=seconds).text
    if text is None:
        return None
    logprob, scored = 0.0, 0
    if not decoder.held:  # the generation stands right after the middle
        previous = None
        try:
            for token in decoder.backend.tokenize(text)[:WITNESS_SCORED_TOKENS]:
                if decoder.stop():
                    break
                if previous is not None:
                    generation.advance(previous)
                logprob += generation.ranking().logprob(token)
                scored += 1
                previous = token
        except (Interrupted, ModelError):  # scoring is a figure: the witness stands
            pass
    return text, logprob, scored
