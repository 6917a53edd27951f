"""Steering, witness endings, looking further down the ranking, stayInside and
alternatives, through ``generate`` with tiny real models (issue 17's decoder side).

The tiny models are biased towards chosen tokens (``tiny_factory``'s ``token_bias``)
or steered step by step (``test_completion.Steered``) so that each behaviour is
reached on purpose; CPython's ``ast.parse`` judges every middle that claims to be
complete.
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    TinyFactory,
    model_cache,
    syntax_options,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)
from test_completion import Steered, byte_token

from lsp_server.decoding import Completion, generate, steering
from lsp_server.decoding.alternatives import ALTERNATIVES, branch, branch_points, ranked
from lsp_server.decoding.restart import restart_points
from lsp_server.decoding.steering import dead_line_end, finish_chars_per_token
from lsp_server.decoding.stopping import StopCheck
from lsp_server.model import FimModel
from lsp_server.status import StopReason
from quotient_parser.quotient import Quotient

Accepts = Callable[[str | bytes], bool]

PLUS_LEFT, PLUS_RIGHT = "x = 1 +", "\nprint(x)\n"


@pytest.fixture(scope="module")
def plus_model(tiny_factory: TinyFactory) -> Iterator[FimModel]:
    """A model that would chain unary pluses forever (the same as test_completion's)."""
    path = tiny_factory("plus", token_bias={" +": 20.0}, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=512) as model:
        yield model


@pytest.fixture(scope="module")
def comment_model(tiny_factory: TinyFactory) -> Iterator[FimModel]:
    """A model that writes a comment and never stops (a line break and ``[`` next)."""
    bias = {"#": 30.0, "\n": 20.0, "[": 15.0}
    path = tiny_factory("comment", stop_bias=-30.0, token_bias=bias, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=512) as model:
        yield model


@pytest.fixture(scope="module")
def closer_model(tiny_factory: TinyFactory) -> Iterator[FimModel]:
    """A model whose favourites are closing brackets and a colon, and that never stops."""
    bias = {")": 30.0, "]": 29.0, "}": 28.0, ":": 27.0}
    path = tiny_factory("closer", stop_bias=-30.0, token_bias=bias, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=512) as model:
        yield model


# ---------------------------------------------------------------- steering


@pytest.mark.parametrize("budget", [4, 8, 16, 32])
def test_steering_finishes_within_every_budget(
    plus_model: FimModel, target: tuple[int, int], ast_accepts: Accepts, budget: int
) -> None:
    """Whatever the budget, the steered middle is complete, model-written and parses;
    without steering the model never finishes."""
    plus_model.cache.reset()
    steered = generate(plus_model, PLUS_LEFT, PLUS_RIGHT, syntax_options(max_tokens=budget),
                       target=target)  # fmt: skip
    plain = generate(plus_model, PLUS_LEFT, PLUS_RIGHT,
                     syntax_options(max_tokens=budget, steer=False), target=target)  # fmt: skip
    assert steered.complete and steered.stop_reason == "steered", steered.middle
    assert steered.tokens <= budget and steered.witness == ""
    assert ast_accepts(PLUS_LEFT + steered.middle + PLUS_RIGHT)
    assert len(steered.steer_us) == len(steered.parser_us) == steered.tokens
    assert plain.stop_reason == "max_tokens" and not plain.complete
    assert plain.steered == 0 and plain.steer_us == []
    if budget >= 8:  # the model is followed while the budget allows: pluses come first
        assert steered.middle.startswith(" + +")


def test_steering_counts_and_scores(plus_model: FimModel, target: tuple[int, int]) -> None:
    plus_model.cache.reset()
    r = generate(plus_model, PLUS_LEFT, PLUS_RIGHT, syntax_options(max_tokens=12), target=target)
    assert r.steered >= 1  # at least the finishing token was not the model's first choice
    assert r.scored_tokens == r.tokens == len(r.token_ids) == len(r.token_logprobs)
    assert r.mean_logprob is not None and r.mean_logprob < 0
    assert r.as_dict()["steered"] == r.steered


def test_finish_chars_per_token_is_measured_once(plus_model: FimModel) -> None:
    first = finish_chars_per_token(plus_model)
    assert 1.0 <= first < 8.0
    assert finish_chars_per_token(plus_model) == first


def test_steering_follows_a_witness_where_the_bound_is_loose(
    comment_model: FimModel,
    target: tuple[int, int],
    ast_accepts: Accepts,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside a list the model writes a comment; a finish needs a line break and a ``[``,
    and the line break does not bring it closer by the lower bound (1 all along).
    Steering follows the witness's text from the model's candidates and finishes;
    steering by the lower bound alone stays in the comment, as the model does."""
    left, right = "x = [1, ", "2]]\n"
    opts = syntax_options(max_tokens=16)
    comment_model.cache.reset()
    r = generate(comment_model, left, right, opts, target=target)
    assert r.complete and r.stop_reason == "steered", r.middle
    assert ast_accepts(left + r.middle + right) and r.witness == ""
    assert "#" in r.middle  # the model was followed while the budget allowed
    monkeypatch.setattr(steering, "WITNESS_HORIZON", -(10**6))  # no witness asked for
    comment_model.cache.reset()
    bound_only = generate(comment_model, left, right, replace(opts, restart=False),
                          target=target)  # fmt: skip
    assert not bound_only.complete and not bound_only.restarted, bound_only.middle


def test_a_middle_that_ran_out_of_budget_restarts_where_a_finish_was_in_reach(
    comment_model: FimModel,
    target: tuple[int, int],
    ast_accepts: Accepts,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steering by the lower bound alone (no witness asked for) stays in the comment to
    the end of the budget; the restart searches the middle's start, finds ``[`` and
    steers there with the model's own candidates: the middle lands, model-written, and
    says it was restarted."""
    left, right = "x = [1, ", "2]]\n"
    monkeypatch.setattr(steering, "WITNESS_HORIZON", -(10**6))
    comment_model.cache.reset()
    r = generate(comment_model, left, right, syntax_options(max_tokens=16), target=target)
    assert r.complete and r.restarted and r.stop_reason == "steered", r.middle
    assert ast_accepts(left + r.middle + right)
    assert r.witness == "" and r.forced == 0
    assert r.as_dict()["restarted"] is True


def test_restart_points_latest_witness_that_fits_first(
    comment_model: FimModel, target: tuple[int, int]
) -> None:
    """The finishes steering found come first, latest first, and only where the budget
    still holds them after their step (their tokens and one more)."""
    quotient = Quotient("x = [1, ", "2]]\n", target)
    found = [(2, "["), (5, "["), (7, "[")]
    first = Completion("", StopReason.MAX_TOKENS, False, 8, witnesses=found)
    opts = syntax_options(max_tokens=8)
    stop = StopCheck(None, None)
    points = restart_points(comment_model, quotient, opts, first, stop)
    assert [next(points), next(points)] == [(5, "["), (2, "[")]


def test_no_comment_that_no_line_break_can_follow(
    comment_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """After ``from os`` a comment is a viable left prefix, but the line break it needs
    can never come: the decoder does not open it."""
    left, right = "from os", "import path\n"
    quotient = Quotient(left, right, target)
    start = quotient.initial
    assert start.feed("#").viable and dead_line_end(start, start.feed("#"))
    assert not dead_line_end(start, start.feed(" "))
    inside = Quotient("x = (1", ")\n", target).initial  # a line break is fine in brackets
    assert not dead_line_end(inside, inside.feed("#"))
    comment_model.cache.reset()
    r = generate(comment_model, left, right, syntax_options(max_tokens=12), target=target)
    assert "#" not in r.middle
    assert r.complete and ast_accepts(left + r.middle + right), r.middle


def test_a_middle_never_comments_out_the_code_after_the_cursor(
    comment_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """``x = f(1) # + 2`` is a valid module, but it turns the code after the cursor into
    a comment: the middle does not *land* there, so the decoder does not stop there."""
    left, right = "x = f(1)", " + 2\ny = 3\n"
    quotient = Quotient(left, right, target)
    swallowing = quotient.initial.feed(" # note")
    assert swallowing.complete and not swallowing.lands
    assert swallowing.distance(natural=True) > 0 and swallowing.distance() == 0
    assert quotient.initial.lands
    blank_line = Quotient("x = f(1)", "\ny = 3\n", target).initial  # R's first line: none
    assert blank_line.feed(" # note").lands
    already = Quotient("x = 1  # a", " comment\ny = 3\n", target).initial  # cursor in one
    assert already.lands and already.feed(" more").lands
    assert not already.feed("\n# another").lands  # a comment of its own on a new line
    for steer in (True, False):
        comment_model.cache.reset()
        opts = syntax_options(max_tokens=12, steer=steer)
        r = generate(comment_model, left, right, opts, target=target)
        # Unsteered, the model may find no end at all (the empty middle is no answer);
        # an incomplete middle is never offered.
        assert r.complete or not steer, (steer, r.middle)
        if r.complete:
            assert "#" not in r.middle.rsplit("\n", 1)[-1], (steer, r.middle)
            assert ast_accepts(left + r.middle + right), r.middle


def test_a_comment_the_cut_split_is_finished_by_a_comment(
    target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """pickle.py's ``# Terminate the current frame | and flush it to the file.``: R's
    first line is the rest of a comment, no middle lands without opening one, and the
    true middle, which ends in that comment, lands; where R's first line may be code
    (also as the rest of a symbol: ``ret`` + ``urn x``) a comment there still does not."""
    left = "class P:\n    def f(self):\n        if self"
    right = "and flush it to the file.\n            self.commit_frame(force=True)\n"
    quotient = Quotient(left, right, target)
    assert not quotient.right_line_can_be_code
    true_middle = ".current_frame:\n            # Terminate the current frame "
    landed = quotient.initial.feed(true_middle)
    assert ast_accepts(left + true_middle + right)
    assert landed.lands and landed.distance(natural=True) == 0
    opened = quotient.initial.feed(".current_frame:\n            ")
    assert opened.distance(natural=True) == 1  # the '#' itself
    found = opened.witness()
    assert found.text == "#" and opened.feed(found.text).lands
    for left, right in [
        ("x = f(1)", " + 2\ny = 3\n"),  # code
        ("def f():\n    x = 1\n    ", "urn x\n"),  # the rest of 'return'
        ("x = 1\nif x:\n    x ", "= y\n"),  # the rest of '=='
    ]:
        quotient = Quotient(left, right, target)
        assert quotient.right_line_can_be_code, right
        middle = "return 1  # " if right.startswith("urn") else "  # "
        swallowing = quotient.initial.feed(middle)
        assert swallowing.complete and not swallowing.lands, right
        assert swallowing.distance(natural=True) > 0
    assert not Quotient("x = 1", "\ny = 2\n", target).right_line_can_be_code  # blank
    # The rest of a string literal may close it and go on with code: "d " * 2".
    assert Quotient("im", 'd " * 2\n    p = 1\n', target).right_line_can_be_code
    # A soft keyword may precede a name; two plain names in a row are never code.
    assert Quotient(
        "x = 1\n", "match x:\n    case _:\n        pass\n", target
    ).right_line_can_be_code
    assert not Quotient("# a\n# b", " c d\nx = 1\n", target).right_line_can_be_code


def test_a_witness_piece_that_splits_a_word_or_blanks_comes_last() -> None:
    """Following a witness, a candidate that ends inside one of its words or runs of
    blanks is taken only where nothing else follows (the model rarely ranks the piece
    that would complete ``c`` into ``cla``, or 12 spaces into 20)."""
    splits = steering._splits_run
    assert splits("c", "la\n") and splits(" " * 12, " " * 8 + "else")
    assert not splits("cla", "") and not splits(" " * 20, "else")
    assert not splits(")", "\ncla") and not splits("if", " x") and not splits(" ", "x(")


# ---------------------------------------------------------------- witness endings


def test_witness_ending_only_when_allowed(
    plus_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """With steering off the model never finishes; a witness ending completes the
    middle with text the model did not write, and says so."""
    plus_model.cache.reset()
    opts = syntax_options(max_tokens=6, steer=False, witness_ending=True)
    r = generate(plus_model, PLUS_LEFT, PLUS_RIGHT, opts, target=target)
    assert r.stop_reason == "witness" and r.complete and r.witness
    assert r.middle.endswith(r.witness) and r.middle.startswith(" +")
    assert ast_accepts(PLUS_LEFT + r.middle + PLUS_RIGHT)
    assert r.scored_tokens > r.tokens  # the witness's tokens are scored too
    plus_model.cache.reset()
    default = generate(plus_model, PLUS_LEFT, PLUS_RIGHT, syntax_options(max_tokens=6, steer=False),
                       target=target)  # fmt: skip
    assert default.witness == "" and default.stop_reason == "max_tokens"
    assert not default.complete


# ---------------------------------------------------------------- further down


def test_further_down_when_no_top_k_candidate_fits(
    closer_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """The top 4 are closers and a colon, none of which fits after ``x = 1 +``."""
    left, right = "x = 1 +", "\n"
    closer_model.cache.reset()
    none = generate(closer_model, left, right,
                    syntax_options(max_tokens=8, top_k=4, further_down=0, steer=False),
                    target=target)  # fmt: skip
    assert none.stop_reason == "no_viable_token" and none.tokens == 0
    closer_model.cache.reset()
    r = generate(closer_model, left, right, syntax_options(max_tokens=8, top_k=4, steer=False),
                 target=target)  # fmt: skip
    assert r.rescued >= 1 and r.tokens >= 1
    assert r.stop_reason != "no_viable_token"
    if r.complete:
        assert ast_accepts(left + r.middle + right)
    closer_model.cache.reset()
    steered = generate(closer_model, left, right, syntax_options(max_tokens=8, top_k=4),
                       target=target)  # fmt: skip
    assert steered.complete and ast_accepts(left + steered.middle + right), steered.middle


@pytest.fixture(scope="module")
def c_model(tiny_factory: TinyFactory) -> Iterator[FimModel]:
    """A model whose favourite is ``c`` (a piece of ``class``), and that never stops."""
    path = tiny_factory("c", stop_bias=-30.0, token_bias={"c": 30.0}, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=512) as model:
        yield model


def test_a_split_gives_way_to_the_witness_own_token(
    c_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """curses/textpad.py's cut: R begins with ``ss A:``, the finish is ``cla``, and the
    model ranks only ``c``, whose rest ``la`` it never ranks.  Steering takes the
    witness's own first token (the vocabulary's ``cla``) instead of the split, and the
    middle lands in one token; where the ranking stays at the top k
    (``further_down=0``) the split is taken and the budget runs out."""
    left, right = "import os\n", "ss A:\n    pass\n"
    c_model.cache.reset()
    opts = syntax_options(max_tokens=2, top_k=4, further_down=1)
    r = generate(c_model, left, right, opts, target=target)
    assert r.complete and r.stop_reason == "steered", r.middle
    assert r.middle == "cla" and r.tokens == 1 and r.rescued == r.steered == r.forced == 1
    assert ast_accepts(left + r.middle + right) and r.witness == ""
    c_model.cache.reset()
    top_only = generate(c_model, left, right, replace(opts, further_down=0), target=target)
    assert top_only.middle.startswith("c") and not top_only.complete, top_only.middle
    assert top_only.forced == 0


def test_the_witness_own_token_is_the_last_resort_with_witness_endings(
    closer_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """R needs a ``[`` that neither the model's top 4 nor the one below them holds, and
    none of those keeps a finish within the one token left after it (multiprocessing/
    process.py's closing quote before R's ``not started")``).  Where witness endings
    are allowed, steering writes the witness's own first token, counted as forced;
    by default the middle stays the model's and does not land."""
    left, right = "x = [1, ", "2]]\n"
    opts = syntax_options(max_tokens=2, top_k=4, further_down=1)
    closer_model.cache.reset()
    r = generate(closer_model, left, right, replace(opts, witness_ending=True), target=target)
    assert r.complete and r.stop_reason == "steered", r.middle
    assert r.middle.endswith("[") and r.forced == 1 and r.witness == ""
    assert r.as_dict()["forced"] == 1
    assert ast_accepts(left + r.middle + right)
    closer_model.cache.reset()
    default = generate(closer_model, left, right, opts, target=target)
    assert not default.complete and default.forced == 0, default.middle


# ---------------------------------------------------------------- stayInside


def test_stay_inside_keeps_the_call_open(
    closer_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """Inside ``max(values, |)`` a closer-loving model closes the call when allowed to;
    under stayInside (the default) it writes an argument instead.  (On one line: over
    several, its ``)`` and line break would write R's ``)`` again, an echo.)"""
    left, right = "values = [1, 2]\ntotal = max(values, ", ")\nprint(total)\n"
    inside = Quotient(left, right, target, stay_inside=True)
    closer_model.cache.reset()
    one_line = syntax_options(max_tokens=16, single_line=True)
    kept = generate(closer_model, left, right, one_line, target=target)
    closer_model.cache.reset()
    free = generate(closer_model, left, right, replace(one_line, stay_inside=False),
                    target=target)  # fmt: skip
    assert kept.complete and not kept.inside_fallback
    assert inside.initial.feed(kept.middle).complete  # it stayed inside
    assert ast_accepts(left + kept.middle + right)
    close = byte_token(closer_model, b")")
    assert free.token_ids[:1] == [close]  # allowed to, it left the call at once
    assert kept.token_ids[:1] != [close]
    if free.complete:
        assert ast_accepts(left + free.middle + right)


def test_stay_inside_falls_back_where_nothing_stays_inside(
    tiny_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """R closes the bracket at the cursor but needs a statement of its own first: no
    middle can stay inside, so the unrestricted quotient is used, and said so."""
    left, right = "x = f(", ") as y:\n    pass\n"
    quotient = Quotient(left, right, target, stay_inside=True)
    # decided once per quotient (kept); given time here so that a loaded machine cannot
    # leave it undecided within the decoder's own bound
    assert quotient.inside_empty(max_nodes=4000, max_seconds=60)
    opts = syntax_options(max_tokens=24, witness_ending=True, deadline_s=30.0)
    r = generate(tiny_model, left, right, opts, quotient=quotient, target=target)
    assert r.inside_fallback
    assert r.complete and ast_accepts(left + r.middle + right), r.middle


# ---------------------------------------------------------------- alternatives


def test_alternatives_branch_off_and_rank(
    plus_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    left, right = "def f(a, b):\n    return a + ", "\n"
    quotient = Quotient(left, right, target, stay_inside=True)
    opts = syntax_options(max_tokens=12)
    plus_model.cache.reset()
    first = generate(plus_model, left, right, opts, quotient=quotient, target=target)
    assert first.complete
    points = branch_points(first, 2 * ALTERNATIVES)
    assert points and all(0 <= p < first.scored_tokens for p in points)
    others = [branch(plus_model, quotient, opts, first, at) for at in points]
    for at, other in zip(points, others):
        if other.token_ids:  # follows the first up to the branch, then differs there
            assert other.token_ids[:at] == first.token_ids[:at]
            assert other.token_ids[at : at + 1] != first.token_ids[at : at + 1]
        if other.complete:
            assert ast_accepts(left + other.middle + right), other.middle
    best = ranked([first, *others])
    assert 2 <= len(best) <= ALTERNATIVES
    assert len({c.middle.rstrip() for c in best}) == len(best)
    scores = [c.mean_logprob for c in best]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_replayed_prefix_is_no_stopping_point(
    tiny_model: FimModel, target: tuple[int, int]
) -> None:
    """A branch never stops inside the steps it shares with the first middle."""
    left, right = "x = ", "\n"
    script = [byte_token(tiny_model, b) for b in (b"(", b"1", b")")]
    steered = Steered(tiny_model, script=script, eog_bias=-1e4)
    quotient = Quotient(left, right, target, stay_inside=True)
    opts = syntax_options(max_tokens=6)
    first = generate(steered, left, right, opts, quotient=quotient, target=target)
    assert first.middle.startswith("(1)")
    other = branch(steered, quotient, opts, first, 1)
    assert other.middle.startswith("(")
    assert other.token_ids[:1] == script[:1] and other.token_ids[1] != script[1]
