"""Tests of the constrained FIM decoding loop (lsp_server.completion) on tiny random models.

The tiny models write garbage, which is what these tests want: whatever the model prefers,
a constrained middle that claims to be complete must make the file parse, and greedy
constrained decoding must succeed wherever greedy unconstrained decoding does.  Steering
wrappers nudge the tiny model's logits to make it emit chosen tokens (partial UTF-8
sequences, end of generation) or never stop.
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from backend_contract import BackendWrapper
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    TinyFactory,
    model_cache,
    syntax_options,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)

from bench.grammar_coverage import Oracle, discover, stdlib_root
from bench.quotient_check import Corpus, make_cuts
from lsp_server.decoding import Completion, DecodeOptions, generate
from lsp_server.decoding.text import split_utf8
from lsp_server.model import Backend, FimModel, LogitsRanking
from lsp_server.model.backend import FloatArray, Interrupt
from lsp_server.model.prompt import RepoContext
from lsp_server.modes import Mode
from quotient_parser.quotient import Quotient

Accepts = Callable[[str | bytes], bool]

#: Small standard-library modules present in every supported Python version.
CUT_FILES = ("bisect.py", "colorsys.py", "fnmatch.py", "shlex.py", "textwrap.py")
CUTS_PER_KIND = 24
CUT_SEED = 7
MAX_TOKENS = 16
BOTH: tuple[Mode, Mode] = ("constrained", "unconstrained")


# ---------------------------------------------------------------- helpers


class Steered(BackendWrapper):
    """A backend that wraps the tiny model, records what the decoder asks and nudges the
    logits.

    ``script[i]`` is made the clear favourite at generation step ``i`` (after ``i``
    appended tokens); ``eog_bias`` is added to every end-of-generation token's logit
    (a large negative value: the model never wants to stop); ``mute_empty`` pushes
    down every token without text (the random model likes its special tokens).
    """

    def __init__(
        self,
        model: FimModel,
        script: Sequence[int] = (),
        eog_bias: float = 0.0,
        mute_empty: bool = False,
    ) -> None:
        super().__init__(model)
        self.model = model
        self.script = list(script)
        self.eog_bias = eog_bias
        self.muted = [t for t, b in enumerate(model.vocab_bytes) if not b] if mute_empty else []
        self.prompts: list[list[int]] = []
        self.prompt_texts: list[tuple[str, str]] = []
        self.appended: list[int] = []

    def build_fim_prompt(
        self,
        prefix: str,
        suffix: str,
        max_new_tokens: int = 128,
        path: str = "",
        budget: int | None = None,
        *,
        context: RepoContext | None = None,
    ) -> list[int]:
        self.prompt_texts.append((prefix, suffix))
        prompt = self.model.build_fim_prompt(
            prefix, suffix, max_new_tokens, path=path, budget=budget, context=context
        )
        self.prompts.append(prompt)
        return prompt

    def start(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> SteeredGeneration:
        self.appended = []
        return SteeredGeneration(self, self.model.cache.evaluate(prompt, interrupt))

    def steer(self, logits: FloatArray) -> LogitsRanking:
        out: FloatArray = logits.copy()
        if self.eog_bias:
            out[self.model.eog_ids] += self.eog_bias
        if self.muted:
            out[self.muted] -= 1e4
        step = len(self.appended)
        if step < len(self.script):
            out[self.script[step]] = float(np.max(out)) + 100.0
        return LogitsRanking(out, self.model.eog_ids)

    def generated_bytes(self) -> bytes:
        return self.model.vocab.detokenize(self.appended)


class SteeredGeneration:
    """The tiny model's generation with the steered logits."""

    def __init__(self, steered: Steered, logits: FloatArray) -> None:
        self.steered = steered
        self._ranking = steered.steer(logits)

    def ranking(self) -> LogitsRanking:
        return self._ranking

    def advance(self, token: int) -> None:
        self.steered.appended.append(token)
        self._ranking = self.steered.steer(self.steered.model.cache.append(token))

    def close(self) -> None:
        pass

    def __enter__(self) -> SteeredGeneration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_model(model: Steered) -> Backend:
    return model  # checks that the wrapper satisfies the decoder's protocol


def byte_token(model: FimModel, data: bytes) -> int:
    """The id of the token whose bytes are exactly ``data``."""
    return model.vocab_bytes.index(data)


def end_token(model: FimModel) -> int:
    eos = model.fim_tokens.eos
    assert eos is not None and model.eog(eos)
    return eos


@dataclass(frozen=True)
class Case:
    kind: str
    file: str
    left: str
    right: str
    middle: str  # the true middle


@dataclass(frozen=True)
class Outcome:
    case: Case
    constrained: Completion
    unconstrained: Completion
    checked: Completion


def _cut_files() -> list[Path]:
    root = stdlib_root()
    files = [root / name for name in CUT_FILES if (root / name).is_file()]
    if len(files) < 3:
        pytest.skip(f"standard library sources not found under {root}")
    return files


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    """Boundary and random-span cuts of a few stdlib files (bench.quotient_check's)."""
    files = discover([str(p) for p in _cut_files()])
    with Oracle() as oracle:
        corpus = Corpus(files, oracle)
        kinds = ("boundary", "randspan")
        cuts = [c for kind in kinds for c in make_cuts(corpus, kind, CUTS_PER_KIND, CUT_SEED)]
        out = []
        for cut in cuts:
            source = corpus.by_name(cut.file)
            assert source is not None
            left, right = source.text[: cut.left_end], source.text[cut.middle_end :]
            out.append(Case(cut.kind, cut.file, left, right, cut.middle))
    return out


def _run(
    model: FimModel, case: Case, options: DecodeOptions, target: tuple[int, int]
) -> Completion:
    # no reset: the three modes of a cut share the prompt in the model's KV cache
    return generate(model, case.left, case.right, options, target=target)


@pytest.fixture(scope="module")
def outcomes(
    tiny_session_model: FimModel, cases: list[Case], target: tuple[int, int]
) -> list[Outcome]:
    """Every cut completed in the three modes, greedy, with the same settings."""
    base = syntax_options(max_tokens=MAX_TOKENS)
    return [
        Outcome(
            case,
            _run(tiny_session_model, case, replace(base, mode="constrained"), target),
            _run(tiny_session_model, case, replace(base, mode="unconstrained"), target),
            _run(tiny_session_model, case, replace(base, mode="checked"), target),
        )
        for case in cases
    ]


def _describe(case: Case, result: Completion) -> str:
    return (
        f"{case.file} ({case.kind}) ...{case.left[-30:]!r} [{result.middle[:60]!r}] "
        f"{case.right[:30]!r}... stop={result.stop_reason} complete={result.complete}"
    )


def _valid(accepts: Accepts, case: Case, result: Completion) -> bool:
    return accepts(case.left + result.middle + case.right)


# ---------------------------------------------------------------- property over cuts


def test_cuts_are_many_and_of_both_kinds(cases: list[Case]) -> None:
    assert len(cases) >= 40
    assert {c.kind for c in cases} == {"boundary", "randspan"}
    # boundary cuts often leave the cursor inside a word: token healing is exercised
    assert any(c.left[-1:].isalnum() for c in cases if c.kind == "boundary")


def test_constrained_claims_are_true(outcomes: list[Outcome], ast_accepts: Accepts) -> None:
    wrong = []
    for o in outcomes:
        r = o.constrained
        if r.stop_reason in ("eos", "connected"):
            assert r.complete is True, _describe(o.case, r)
        if r.complete and not _valid(ast_accepts, o.case, r):
            wrong.append(_describe(o.case, r))
        assert r.tokens <= MAX_TOKENS
        assert "\ufffd" not in r.middle
    assert not wrong, "complete middles that do not parse:\n" + "\n".join(wrong)


def test_constrained_beats_unconstrained(outcomes: list[Outcome], ast_accepts: Accepts) -> None:
    constrained = [_valid(ast_accepts, o.case, o.constrained) for o in outcomes]
    unconstrained = [_valid(ast_accepts, o.case, o.unconstrained) for o in outcomes]
    # The random model writes garbage: left to itself it mostly breaks the file ...
    assert sum(unconstrained) <= len(outcomes) // 2
    # ... and greedy constrained decoding follows it wherever its garbage happens to fit
    # (every prefix of a valid middle is viable), so it succeeds at least there,
    lost = [
        _describe(o.case, o.constrained)
        for o, c, u in zip(outcomes, constrained, unconstrained)
        if u and not c
    ]
    assert not lost, "unconstrained valid but constrained not:\n" + "\n".join(lost)
    # ... and somewhere else too.
    assert sum(constrained) > sum(unconstrained)
    assert all(o.unconstrained.complete is None for o in outcomes)


def test_steering_connects_more_middles(
    outcomes: list[Outcome],
    tiny_factory: TinyFactory,
    target: tuple[int, int],
    ast_accepts: Accepts,
) -> None:
    """A model that would chain unary pluses forever never completes ``x = 1 +`` by
    itself; steering (the default) takes a completing candidate once the tokens left
    come near the distance to a finish, and stops there."""
    path = tiny_factory("plus", token_bias={" +": 20.0}, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=512) as model:
        case = Case("boundary", "plus.py", "x = 1 +", "\nprint(x)\n", "")
        plain = generate(
            model, case.left, case.right, syntax_options(max_tokens=16, steer=False), target=target
        )
        steered = generate(model, case.left, case.right, syntax_options(max_tokens=16),
                           target=target)  # fmt: skip
    assert plain.stop_reason == "max_tokens" and not plain.complete
    assert steered.stop_reason == "steered" and steered.complete, steered.middle
    assert steered.tokens <= 16 and steered.steered >= 1
    assert steered.witness == ""  # the model wrote all of it
    assert _valid(ast_accepts, case, steered)
    # Over the stdlib cuts, whatever steering finished parses.
    for o in outcomes:
        if o.constrained.stop_reason == "steered":
            assert _valid(ast_accepts, o.case, o.constrained), _describe(o.case, o.constrained)


def test_checked_mode(outcomes: list[Outcome], ast_accepts: Accepts) -> None:
    for o in outcomes:
        c, u = o.checked, o.unconstrained
        assert u.middle.startswith(c.middle), _describe(o.case, c)
        assert c.tokens == u.tokens
        if c.complete:
            assert _valid(ast_accepts, o.case, c), _describe(o.case, c)
            if c.middle != u.middle:
                assert c.stop_reason == "checked_prefix"
        else:
            assert c.complete is False
            assert c.middle == u.middle
            assert not ast_accepts(o.case.left + o.case.right)
    assert sum(bool(o.checked.complete) for o in outcomes) >= sum(
        _valid(ast_accepts, o.case, o.unconstrained) for o in outcomes
    )


def test_timings_and_parser_samples(outcomes: list[Outcome]) -> None:
    for o in outcomes:
        c = o.constrained
        for key in ("quotient_ms", "prompt_ms", "prompt_tokens", "generate_ms", "total_ms"):
            assert key in c.timings.as_dict()
        # one parser sample per decoding step (the last one may end generation)
        assert c.tokens <= len(c.parser_us) <= c.tokens + 1
        assert all(us >= 0 for us in c.parser_us)
        assert o.unconstrained.timings.quotient_ms is None
        assert not o.unconstrained.parser_us


def test_single_line(
    tiny_model: FimModel, cases: list[Case], target: tuple[int, int], ast_accepts: Accepts
) -> None:
    chosen = cases[:8] + cases[CUTS_PER_KIND : CUTS_PER_KIND + 8]
    for mode in BOTH:
        options = syntax_options(mode=mode, max_tokens=MAX_TOKENS, single_line=True)
        for case in chosen:
            r = _run(tiny_model, case, options, target)
            assert "\n" not in r.middle and "\r" not in r.middle, _describe(case, r)
            if r.complete:
                assert _valid(ast_accepts, case, r), _describe(case, r)
    # a never-stopping model still keeps to one line
    steered = Steered(tiny_model, eog_bias=-1e4)
    for mode in BOTH:
        tiny_model.cache.reset()
        options = syntax_options(mode=mode, max_tokens=24, single_line=True)
        r = generate(steered, "# note: ", "\nx = 1\n", options, target=target)
        assert r.tokens > 0
        assert "\n" not in r.middle and "\r" not in r.middle


# ---------------------------------------------------------------- token healing


HEAL_LEFT = "import sys\n\n\ndef main(argv):\n    total = len(argv)\n    return pri"
HEAL_RIGHT = "\n\n\nmain(sys.argv)\n"


@pytest.mark.parametrize("mode", ["constrained", "unconstrained", "checked"])
def test_token_healing(
    tiny_model: FimModel, target: tuple[int, int], ast_accepts: Accepts, mode: Mode
) -> None:
    # The model writes " print" first and then never wants to stop (it would like to at
    # once: L + R parses).
    steered = Steered(tiny_model, [byte_token(tiny_model, b" print")], eog_bias=-1e4)
    q = Quotient(HEAL_LEFT, HEAL_RIGHT, target)
    options = syntax_options(mode=mode, max_tokens=8)
    r = generate(steered, HEAL_LEFT, HEAL_RIGHT, options, quotient=q, target=target)

    # the word's last token was taken out of the prompt ...
    assert r.healed and r.healed.strip() == "pri" and HEAL_LEFT.endswith(r.healed)
    assert steered.prompt_texts == [(HEAL_LEFT[: -len(r.healed)], HEAL_RIGHT)]
    # ... and the first generated tokens wrote it again: the middle follows it, once
    # (steering may stop right after the token that completes the middle, which the
    # model then never reads: the constrained decoder's record holds every token it took)
    taken = r.token_ids if mode == "constrained" else steered.appended
    assert taken[: len(steered.appended)] == steered.appended
    generated = tiny_model.vocab.detokenize(taken).decode("utf-8", errors="replace")
    assert generated.startswith(r.healed)
    assert generated[len(r.healed) :].startswith(r.middle)
    assert r.middle.startswith("nt")  # "return print...", not "return pri print..."
    # the middle is judged after the whole left context, healed word included
    if mode == "constrained":
        assert r.timings.quotient_ms is None  # the quotient passed in was used
        assert q.initial.feed(r.middle).complete is r.complete
    if r.complete:
        assert ast_accepts(HEAL_LEFT + r.middle + HEAL_RIGHT)


def test_token_healing_can_be_turned_off(tiny_model: FimModel, target: tuple[int, int]) -> None:
    steered = Steered(tiny_model)
    options = syntax_options(max_tokens=4, token_healing=False)
    r = generate(steered, HEAL_LEFT, HEAL_RIGHT, options, target=target)
    assert r.healed == ""
    assert steered.prompt_texts == [(HEAL_LEFT, HEAL_RIGHT)]


def test_token_healing_not_after_punctuation(tiny_model: FimModel, target: tuple[int, int]) -> None:
    steered = Steered(tiny_model)
    left = "def f(x):\n    return ("
    r = generate(steered, left, ")\n", syntax_options(max_tokens=4), target=target)
    assert r.healed == ""
    assert steered.prompt_texts == [(left, ")\n")]


def test_token_healing_picks_a_matching_token(
    tiny_model: FimModel, target: tuple[int, int]
) -> None:
    # The random model would not put a token starting with " pri" in its top k; healing
    # looks further, so the healed word is always written again.
    for mode in BOTH:
        steered = Steered(tiny_model, eog_bias=-1e4, mute_empty=True)
        options = syntax_options(mode=mode, max_tokens=3, top_k=5)
        r = generate(steered, HEAL_LEFT, HEAL_RIGHT, options, target=target)
        assert r.healed
        assert steered.generated_bytes().startswith(r.healed.encode()), mode


# ---------------------------------------------------------------- UTF-8


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", ("", b"")),
        (b"abc", ("abc", b"")),
        (b"caf\xc3\xa9", ("café", b"")),
        (b"caf\xc3", ("caf", b"\xc3")),
        (b"\xe2\x82", ("", b"\xe2\x82")),
        (b"x\xf0\x9f\x90", ("x", b"\xf0\x9f\x90")),
        (b"\xe2\x82\xac", ("€", b"")),
        (b"\xa9", None),  # a continuation byte with nothing before it
        (b"\xff", None),
        (b"a\xc3(", None),  # a broken sequence, not an unfinished one
        (b"\xc3\xa9\xc3(", None),
    ],
)
def test_utf8_split(data: bytes, expected: tuple[str, bytes] | None) -> None:
    assert split_utf8(data) == expected


@pytest.mark.parametrize("mode", ["constrained", "unconstrained"])
def test_utf8_sequences_across_tokens(
    tiny_model: FimModel, target: tuple[int, int], mode: Mode
) -> None:
    left, right = 'price = "12 ', '"\n'
    euro = [byte_token(tiny_model, bytes([b])) for b in "€".encode()]  # three 1-byte tokens
    steered = Steered(tiny_model, script=[*euro, end_token(tiny_model)])
    options = syntax_options(mode=mode, max_tokens=8)
    r = generate(_as_model(steered), left, right, options, target=target)
    assert (r.middle, r.stop_reason, r.tokens) == ("€", "eos", 3)
    if mode == "constrained":
        assert r.complete is True


@pytest.mark.parametrize("mode", ["constrained", "unconstrained"])
def test_utf8_incomplete_tail_is_held_back(
    tiny_model: FimModel, target: tuple[int, int], mode: Mode
) -> None:
    left, right = 'name = "a ', '"\n'  # no word before the cursor: no token healing
    head = byte_token(tiny_model, b"\xc3")
    steered = Steered(tiny_model, script=[head])
    options = syntax_options(mode=mode, max_tokens=8)
    # stop right after the first token: its byte starts a character that never ends
    stop_after_one = lambda: bool(steered.appended)  # noqa: E731
    r = generate(steered, left, right, options, target=target, cancel=stop_after_one)
    assert steered.appended == [head]
    assert (r.middle, r.stop_reason, r.tokens) == ("", "cancelled", 1)


def test_utf8_constrained_end_waits_for_whole_character(
    tiny_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    left, right = 'name = "a ', '"\n'
    head = byte_token(tiny_model, b"\xc3")
    # the model wants to stop right after half a character: the decoder may not
    steered = Steered(tiny_model, script=[head, end_token(tiny_model)])
    r = generate(steered, left, right, syntax_options(max_tokens=6), target=target)
    assert steered.appended[0] == head and len(steered.appended) >= 2
    assert "\ufffd" not in r.middle
    assert r.complete is True and ast_accepts(left + r.middle + right)


def test_utf8_broken_token_is_skipped(tiny_model: FimModel, target: tuple[int, int]) -> None:
    stray = byte_token(tiny_model, b"\xa9")  # a continuation byte cannot start a character
    for mode in BOTH:
        steered = Steered(tiny_model, script=[stray], eog_bias=-1e4)
        options = syntax_options(mode=mode, max_tokens=2, steer=False)
        r = generate(steered, 's = "', '"\n', options, target=target)
        assert steered.appended and steered.appended[0] != stray, mode
        assert "\ufffd" not in r.middle


# ---------------------------------------------------------------- cancel and deadline


@pytest.mark.parametrize("mode", ["constrained", "unconstrained", "checked"])
def test_cancel_stops_between_tokens(
    tiny_model: FimModel, target: tuple[int, int], ast_accepts: Accepts, mode: Mode
) -> None:
    steered = Steered(tiny_model, eog_bias=-1e4)
    polls: list[int] = []

    def cancel() -> bool:
        polls.append(len(steered.appended))
        return len(steered.appended) >= 3

    options = syntax_options(mode=mode, max_tokens=50)
    r = generate(steered, "# a comment: ", "\nx = 1\n", options, target=target, cancel=cancel)
    assert r.stop_reason == "cancelled"
    assert r.tokens == 3 == len(steered.appended)
    assert polls == [0, 0, 1, 2, 3]  # once for the (one-chunk) prompt, then before every token
    if r.complete:
        assert ast_accepts("# a comment: " + r.middle + "\nx = 1\n")


def test_cancel_before_the_first_token(tiny_model: FimModel, target: tuple[int, int]) -> None:
    r = generate(tiny_model, "x = ", "\n", syntax_options(), target=target, cancel=lambda: True)
    assert (r.stop_reason, r.tokens, r.middle, r.complete) == ("cancelled", 0, "", False)


@pytest.mark.parametrize("mode", ["constrained", "unconstrained"])
def test_deadline(tiny_model: FimModel, target: tuple[int, int], mode: Mode) -> None:
    left, right = "# a comment: ", "\nx = 1\n"
    q = Quotient(left, right, target)
    steered = Steered(tiny_model, eog_bias=-1e4)
    options = syntax_options(mode=mode, max_tokens=600, deadline_s=0.3)
    r = generate(steered, left, right, options, quotient=q, target=target)
    assert r.stop_reason == "deadline"
    assert 0 < r.tokens < 600
    assert r.tokens == len(steered.appended)


def test_deadline_already_passed(tiny_model: FimModel, target: tuple[int, int]) -> None:
    r = generate(tiny_model, "x = ", "\n", syntax_options(deadline_s=0.0), target=target)
    assert (r.stop_reason, r.tokens) == ("deadline", 0)


# ---------------------------------------------------------------- stopping


def test_end_of_generation_only_where_complete(
    tiny_model: FimModel, target: tuple[int, int]
) -> None:
    # The model wants to stop at once; "x = " is not a statement, so the constrained
    # decoder writes on until it is, and unconstrained decoding stops with nothing.
    eos = end_token(tiny_model)
    steered = Steered(tiny_model, script=[eos] * 8)
    r = generate(steered, "x = ", "\n", syntax_options(mode="unconstrained"), target=target)
    assert (r.middle, r.stop_reason, r.tokens) == ("", "eos", 0)
    tiny_model.cache.reset()
    r = generate(steered, "x = ", "\n", syntax_options(max_tokens=8), target=target)
    assert r.tokens > 0 and r.complete is True
    assert r.stop_reason in ("eos", "max_tokens")


def test_fallback_cuts_inside_a_token(tiny_model: FimModel, target: tuple[int, int]) -> None:
    # At the token limit the longest complete prefix is returned, even one that ends
    # inside a token: "(1)" here, from the tokens "(", "1", ")+".
    script = [byte_token(tiny_model, b) for b in (b"(", b"1", b")+")]
    steered = Steered(tiny_model, script=script, eog_bias=-1e4)
    options = syntax_options(max_tokens=3, steer=False)  # steering would finish at "(1"
    r = generate(steered, "x = ", "\n", options, target=target)
    assert steered.appended == script
    assert (r.middle, r.stop_reason, r.complete) == ("(1)", "max_tokens", True)


def test_fallback_never_claims_an_incomplete_middle(
    tiny_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    # "(1()" is not complete, and neither is any prefix of it; but "(1)" is: the search
    # inside the tokens must not judge "1()" from the state before the "1".  (No
    # restart: the middle it returned is the fallback's.)
    script = [byte_token(tiny_model, b) for b in (b"1", b"(", b")")]
    steered = Steered(tiny_model, script=script, eog_bias=-1e4)
    options = syntax_options(max_tokens=3, restart=False)
    r = generate(steered, "x = (", "\n", options, target=target)
    assert steered.appended == script
    assert (r.middle, r.stop_reason, r.complete) == ("1()", "max_tokens", False)
    assert not ast_accepts("x = (" + r.middle + "\n")


# ---------------------------------------------------------------- models without FIM


@pytest.fixture(scope="module")
def nofim_model(tiny_factory: TinyFactory) -> Iterator[FimModel]:
    path = tiny_factory("nofim", strip_fim=True, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=1024) as model:
        yield model


def test_no_fim_prompt_is_the_prefix(nofim_model: FimModel, target: tuple[int, int]) -> None:
    assert not nofim_model.has_fim and nofim_model.layout.order == "none"
    nofim_model.cache.reset()
    steered = Steered(nofim_model)
    left, right = "def f(x):\n    return x + (", ")\n\n\nprint(f(1))\n"
    generate(steered, left, right, syntax_options(max_tokens=4), target=target)
    assert len(steered.prompts) == 1
    assert nofim_model.vocab.detokenize(steered.prompts[0]) == left.encode()


def test_no_fim_constrained(
    nofim_model: FimModel, cases: list[Case], target: tuple[int, int], ast_accepts: Accepts
) -> None:
    chosen = cases[:10] + cases[CUTS_PER_KIND : CUTS_PER_KIND + 10]
    for case in chosen:
        r = _run(nofim_model, case, syntax_options(max_tokens=MAX_TOKENS), target)
        if r.stop_reason in ("eos", "connected"):
            assert r.complete is True
        if r.complete:
            assert _valid(ast_accepts, case, r), _describe(case, r)


def test_no_fim_stops_at_the_first_connected_line_end(
    nofim_model: FimModel, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    # The model never sees "y = 2": left alone it would write on past the line.
    left, right = "x = ", "\ny = 2\n"
    nofim_model.cache.reset()
    r = generate(nofim_model, left, right, syntax_options(max_tokens=MAX_TOKENS), target=target)
    assert (r.stop_reason, r.complete) == ("connected", True)
    assert r.middle and "\n" not in r.middle
    assert ast_accepts(left + r.middle + right)
    options = syntax_options(max_tokens=MAX_TOKENS, stop_when_connected=False)
    r = generate(nofim_model, left, right, options, target=target)
    assert r.stop_reason != "connected"


@pytest.mark.parametrize(("left", "right"), [("", ""), ("", "x = 1\n"), ("pri", "\n"), ("x", "")])
def test_no_fim_with_nothing_before_the_cursor(
    nofim_model: FimModel, target: tuple[int, int], ast_accepts: Accepts, left: str, right: str
) -> None:
    # Without BOS, FIM tokens or text before the cursor (healing may take all of it)
    # the prompt would be empty.
    for mode in BOTH:
        nofim_model.cache.reset()
        options = syntax_options(mode=mode, max_tokens=4)
        r = generate(nofim_model, left, right, options, target=target)
        assert r.timings.prompt_tokens >= 1
        if r.complete:
            assert ast_accepts(left + r.middle + right)


def test_deadline_during_the_prompt(tiny_model: FimModel, target: tuple[int, int]) -> None:
    """A prompt that cannot be read in time gives no middle, and the next request at the
    same place reads only what is left of it."""
    left, right = "x = 1\n" * 300 + "y = (", ")\n"
    r = generate(tiny_model, left, right, syntax_options(deadline_s=0.0), target=target)
    assert (r.middle, r.stop_reason, r.tokens, r.complete) == ("", "deadline", 0, False)
    assert r.timings.prompt_tokens > len(tiny_model.cache.cached_tokens)
    before = tiny_model.cache.n_decoded
    again = generate(tiny_model, left, right, syntax_options(max_tokens=4), target=target)
    assert again.stop_reason != "deadline"
    assert tiny_model.cache.n_decoded - before <= again.timings.prompt_tokens + again.tokens
