"""Every FIM family end to end through llama.cpp, on its real vocabulary.

For each family of ``lsp_server.model.tiny_families`` (a tiny random model with the
family's published tokenizer): what ``FimModel`` detects (FIM tokens, prompt layout,
end-of-generation tokens), the exact prompt tokens against the family's reference
layout, and, through ``generate``: every end token ends a middle, token healing writes
the healed word again, a character cut into byte tokens is held back until whole, and
the no-FIM path. SentencePiece's '▁' spaces and byte-fallback tokens (``<0xF0>``) must
come out as the bytes they stand for.

Tests marked ``xfail(strict=True)`` show what the current code gets wrong for a family;
their reasons say what the right behaviour is.
"""

# Fixtures imported from the fixture modules are requested by parameter name, which ruff
# reads as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from family_fixtures import (  # noqa: F401  (fixtures are used by name)
    FAMILY_NAMES,
    FamilyModel,
    family_model,
    family_path,
)
from model_fixtures import model_cache  # noqa: F401
from test_completion import Steered

from lsp_server.decoding import DecodeOptions, generate
from lsp_server.model.families import assemble_prompt
from lsp_server.model.llm import FimModel
from lsp_server.model.tiny_families import FAMILIES
from lsp_server.modes import Mode

Get = Callable[[str], FamilyModel]

FIM_FAMILIES = [n for n in FAMILY_NAMES if FAMILIES[n].has_fim]
NO_FIM_FAMILIES = [n for n in FAMILY_NAMES if not FAMILIES[n].has_fim]
#: SentencePiece-style vocabularies: '▁' for spaces, <0xXX> byte-fallback tokens.
SPM_FAMILIES = ["codellama", "codestral", "gemma"]
#: SentencePiece vocabularies that prepend a space to what they tokenize.
DUMMY_SPACE_FAMILIES = ["codellama", "codestral"]

#: What FimModel should detect: (family, order, BOS first, suffix without a leading space).
LAYOUTS = {
    "starcoder2": ("starcoder", "psm", False, False),
    "qwen2.5-coder": ("qwen", "psm", False, False),
    "qwen3": ("qwen", "psm", False, False),
    "deepseek-coder": ("deepseek", "psm", True, False),
    "codellama": ("codellama", "psm", True, True),
    "codestral": ("codestral", "sp", True, True),
    "llama3": ("none", "none", True, False),
    "gemma": ("none", "none", True, False),
}

PREFIX = "def area(w, h):\n    return w * h\n\n\ndef main():\n    total = area(2, "
SUFFIX = ")\n    print(total)\n"
HEAL_LEFT = "import sys\n\n\ndef main(argv):\n    total = len(argv)\n    return pri"
HEAL_RIGHT = "\n\n\nmain(sys.argv)\n"
SNAKE = "🐍"


def _byte_token(model: FimModel, value: int) -> int:
    """The token that renders as the single byte ``value``."""
    return model.vocab_bytes.index(bytes([value]))


def _end_token(model: FimModel) -> int:
    eos = model.fim_tokens.eos
    assert eos is not None and model.eog(eos)
    return eos


# ---------------------------------------------------------------- what llama.cpp detects


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_fim_tokens_are_detected(family_model: Get, name: str) -> None:
    fam = family_model(name)
    ft = fam.model.fim_tokens
    found = {k: getattr(ft, k) for k in ("pre", "suf", "mid", "pad", "rep", "sep")}
    assert {k: v for k, v in found.items() if v is not None} == dict(fam.spec.fim)
    assert fam.model.has_fim is fam.spec.has_fim


@pytest.mark.parametrize("name", [n for n in FAMILY_NAMES if n in LAYOUTS])
def test_prompt_layout_is_detected(family_model: Get, name: str) -> None:
    layout = family_model(name).model.layout
    assert (layout.family, layout.order, layout.add_bos, layout.suffix_no_space) == LAYOUTS[name]


@pytest.mark.xfail(
    strict=True,
    reason="Mellum is trained suffix-first: <filename>path<fim_suffix>suffix<fim_prefix>"
    "prefix<fim_middle> (JetBrains/mellum-sdk); FimModel takes <fim_prefix> for StarCoder "
    "and lays the prompt out prefix-first",
)
def test_mellum_prompt_is_suffix_first(family_model: Get) -> None:
    m = family_model("mellum").model
    ft = m.fim_tokens
    prompt = m.build_fim_prompt("a = 1\n", "b = 2\n")
    filename = m.tokenize("<filename>", parse_special=True)
    body = prompt[len(filename) :] if prompt[: len(filename)] == filename else prompt
    assert body[0] == ft.suf and body[-1] == ft.mid
    assert body.index(ft.pre or -1) > body.index(ft.suf or -1)


@pytest.mark.xfail(
    strict=True,
    reason="Mellum's middle ends where the next file starts: <filename> (mellum-sdk stops at "
    "it, as StarCoder2 models stop at <file_sep>); FimModel does not know the token, and "
    "a control token that is not an end token is skipped",
)
def test_mellum_stops_at_the_next_file(family_model: Get) -> None:
    m = family_model("mellum").model
    filename = m.tokenize("<filename>", parse_special=True)
    assert len(filename) == 1 and m.eog(filename[0])


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=pytest.mark.xfail(
                strict=True,
                reason="spm_infill lays the prompt out <SUF>suffix<PRE>prefix<MID> (llama.cpp's "
                "spm_infill); StarCoder2 (bigcode Megatron-LM: [prefix_tok, suffix_tok] suffix "
                "[middle_tok] prefix) and CodeLlama (infilling_prompt_tokens suffix_first: "
                "<s><PRE><SUF>suffix<MID>prefix) were trained on <PRE><SUF>suffix<MID>prefix",
            ),
        )
        for name in ("starcoder2", "codellama")
    ],
)
def test_suffix_first_prompt_is_the_trained_one(
    family_path: Callable[[str], Path], name: str
) -> None:
    with FimModel(family_path(name), n_ctx=256, spm_infill=True) as m:
        ft = m.fim_tokens
        bos = [ft.bos] if m.layout.add_bos and ft.bos is not None else []
        prefix, suffix = "a = 1\n", "b = 2\n"
        suf = m.vocab.tokenize_infill(suffix) if m.layout.suffix_no_space else m.tokenize(suffix)
        expected = [*bos, ft.pre, ft.suf, *suf, ft.mid, *m.tokenize(prefix)]
        assert m.build_fim_prompt(prefix, suffix) == expected


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_end_of_generation_tokens(family_model: Get, name: str) -> None:
    fam = family_model(name)
    m = fam.model
    native = [t for t in range(m.vocab.n_vocab) if m.vocab.native_eog(t)]
    assert native == list(fam.spec.eog)
    # FimModel also stops at the FIM markers, the end of text and the end of turn
    ft = m.fim_tokens
    ends = {t for t in (*fam.spec.fim.values(), ft.eot, ft.eos) if t is not None}
    assert set(m.eog_ids) == set(fam.spec.eog) | ends
    assert all(m.eog(t) for t in m.eog_ids)
    assert all(m.vocab.token_bytes[t] == b"" for t in m.eog_ids)  # control tokens: no text


def test_codellama_end_of_infill_token(family_model: Get) -> None:
    """llama.cpp looks for '_<EOT>' (ASCII underscore) and so misses CodeLlama's '▁<EOT>':
    its end-of-generation set is </s> alone; FimModel adds ▁<EOT> by its text."""
    m = family_model("codellama").model
    assert m.vocab.token_text(32010) == "▁<EOT>"
    assert not m.vocab.native_eog(32010)
    assert m.fim_tokens.eot == 32010 and m.eog(32010)


# ---------------------------------------------------------------- prompts


def _reference_prompt(m: FimModel, order: str, prefix: str, suffix: str) -> list[int]:
    """The prompt as the family's reference code builds it."""
    ft = m.fim_tokens
    bos = [ft.bos] if m.layout.add_bos and ft.bos is not None else []
    pre = m.tokenize(prefix)
    # CodeLlama's encode_infilling and mistral-common encode the suffix without
    # SentencePiece's leading space: what follows a character that takes one piece.
    suf = m.tokenize("☺" + suffix)[2:] if m.layout.suffix_no_space else m.tokenize(suffix)
    if order == "none":
        return [*bos, *pre]
    assert ft.pre is not None and ft.suf is not None
    if order == "sp":
        return [*bos, ft.suf, *suf, ft.pre, *pre]
    assert ft.mid is not None
    return [*bos, ft.pre, *pre, ft.suf, *suf, ft.mid]


@pytest.mark.parametrize("name", [n for n in FAMILY_NAMES if n in LAYOUTS])
@pytest.mark.parametrize(
    "suffix", [SUFFIX, " return a + b", "\n    return a + b\n", "return café\n", "\tx\n", ""]
)
def test_prompt_tokens_follow_the_reference(family_model: Get, name: str, suffix: str) -> None:
    m = family_model(name).model
    expected = _reference_prompt(m, LAYOUTS[name][1], PREFIX, suffix)
    assert m.build_fim_prompt(PREFIX, suffix) == expected
    if m.has_fim:  # the suffix part renders exactly as the suffix
        ft = m.fim_tokens
        start = expected.index(ft.suf or -1) + 1
        end = expected.index(ft.pre or -1) if m.layout.order == "sp" else len(expected) - 1
        assert m.vocab.detokenize(expected[start:end]) == suffix.encode()


def test_codestral_prompt_matches_mistral_common(family_model: Get) -> None:
    """mistral-common's v3 FIM encoding (tests/data/expected/fim/v3_spm.jsonl): '<s>' 1,
    '[SUFFIX]' 13, the suffix, '[PREFIX]' 11, the prefix with its leading space; a newline
    opening the suffix is the byte token <0x0A>, id 781."""
    m = family_model("codestral").model
    assert m.build_fim_prompt("def f(", "")[:3] == [1, 13, 11]
    prompt = m.build_fim_prompt("def f(", "\n    return a + b")
    assert prompt[:3] == [1, 13, 781] and m.vocab.token_text(781) == "<0x0A>"
    at = prompt.index(11)
    assert m.vocab.detokenize(prompt[at + 1 :]) == b" def f("


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_long_context_is_cut_on_line_boundaries(family_model: Get, name: str) -> None:
    """The prompt fits the window, keeping whole lines nearest the cursor, whatever the
    tokenizer does with spaces (SentencePiece's leading space is not text of the file)."""
    m = family_model(name).model
    prefix = "".join(f"value_{i} = compute({i}, 'é')\n" for i in range(400)) + "total = "
    suffix = " + 1\n" + "".join(f"after_{i}(x, y)  # ✓\n" for i in range(400))
    kept_prefix, kept_suffix = m.prompts.fit(prefix, suffix, m.prompts.window_budget(64))
    assert prefix.endswith(kept_prefix) and kept_prefix.endswith("total = ")
    assert prefix[len(prefix) - len(kept_prefix) - 1] == "\n"
    prompt = m.build_fim_prompt(prefix, suffix, max_new_tokens=64)
    most = m.prompts.window_budget(64) + len(assemble_prompt(m.layout, m.fim_tokens, [], []))
    assert most - 40 <= len(prompt) <= most  # at most a line short on each side
    if m.has_fim:
        assert suffix.startswith(kept_suffix) and kept_suffix.endswith("\n")
        assert len(kept_suffix) > 100
    else:
        assert kept_suffix == ""


# ---------------------------------------------------------------- token text


@pytest.mark.parametrize("name", FAMILY_NAMES)
@pytest.mark.parametrize(
    "text", ["def f(x):\n    return x + 1\n", "naïve café — “quotes” ✓\n", "emoji 🐍🚀 日本語\n"]
)
def test_token_bytes_round_trip(family_model: Get, name: str, text: str) -> None:
    m = family_model(name).model
    tokens = m.tokenize(text)
    lead = b" " if name in DUMMY_SPACE_FAMILIES else b""
    assert m.vocab.detokenize(tokens) == lead + text.encode()


@pytest.mark.parametrize("name", SPM_FAMILIES)
def test_sentencepiece_spaces_and_byte_tokens_render_as_bytes(family_model: Get, name: str) -> None:
    m = family_model(name).model
    texts = [m.vocab.token_text(t) for t in range(m.vocab.n_vocab)]
    byte_tokens = [t for t, s in enumerate(texts) if len(s) == 6 and s.startswith("<0x")]
    assert len(byte_tokens) == 256
    assert all(m.vocab.token_bytes[t] == bytes([int(texts[t][3:5], 16)]) for t in byte_tokens)
    assert not any("\u2581".encode() in b for b in m.vocab_bytes)  # '▁' is a space
    spaced = [t for t, s in enumerate(texts) if s.startswith("▁") and m.vocab.token_bytes[t]]
    assert spaced and all(m.vocab.token_bytes[t].startswith(b" ") for t in spaced)
    snake = m.tokenize("x" + SNAKE)
    if name != "gemma":  # Gemma 4 has the snake as one piece
        assert [texts[t] for t in snake[-4:]] == ["<0xF0>", "<0x9F>", "<0x90>", "<0x8D>"]


# ---------------------------------------------------------------- generation


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_every_end_token_ends_the_middle(
    family_model: Get, name: str, target: tuple[int, int]
) -> None:
    fam = family_model(name)
    left, right = "x = 1\n", "y = 2\n"  # complete with nothing in between
    for token in sorted(fam.model.eog_ids):
        for mode in ("constrained", "unconstrained"):
            steered = Steered(fam.model, [token])
            options = DecodeOptions(mode=mode, max_tokens=4)
            r = generate(steered, left, right, options, target=target)
            if mode == "constrained" and not fam.model.has_fim:
                # A model that never sees the code after the cursor ends where it thinks
                # the file ends: right after the left context, that is no suggestion.
                assert r.middle or r.stop_reason != "eos", (token, mode)
                continue
            assert (r.middle, r.stop_reason, r.tokens) == ("", "eos", 0), (token, mode)


@pytest.mark.parametrize("name", FAMILY_NAMES)
@pytest.mark.parametrize("mode", ["constrained", "unconstrained"])
def test_token_healing_writes_the_word_again(
    family_model: Get, name: str, mode: Mode, target: tuple[int, int]
) -> None:
    m = family_model(name).model
    last = m.tokenize(HEAL_LEFT.rsplit("\n", 1)[1])[-1]
    healed = m.vocab.token_bytes[last].decode()
    assert healed.strip() == "pri"
    steered = Steered(m, [last], eog_bias=-1e4)
    r = generate(steered, HEAL_LEFT, HEAL_RIGHT, DecodeOptions(mode=mode, max_tokens=4),
                 target=target)  # fmt: skip
    assert r.healed == healed
    assert steered.prompt_texts == [(HEAL_LEFT[: -len(healed)], HEAL_RIGHT)]
    generated = steered.generated_bytes().decode("utf-8", errors="replace")
    assert generated.startswith(healed) and generated[len(healed) :].startswith(r.middle)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_token_healing_looks_beyond_the_top_k(
    family_model: Get, name: str, target: tuple[int, int]
) -> None:
    m = family_model(name).model
    for mode in ("constrained", "unconstrained"):
        m.cache.reset()
        steered = Steered(m, eog_bias=-1e4, mute_empty=True)
        options = DecodeOptions(mode=mode, max_tokens=3, top_k=5)
        r = generate(steered, HEAL_LEFT, HEAL_RIGHT, options, target=target)
        assert r.healed.strip() == "pri"
        generated = steered.generated_bytes()
        owed = r.healed.encode()
        assert generated.startswith(owed) or owed.startswith(generated), (mode, generated)
        assert len(generated) > 0


@pytest.mark.parametrize("name", FAMILY_NAMES)
@pytest.mark.parametrize("mode", ["constrained", "unconstrained"])
def test_character_in_byte_tokens_is_held_back_until_whole(
    family_model: Get, name: str, mode: Mode, target: tuple[int, int]
) -> None:
    m = family_model(name).model
    left, right = 'name = "a ', '"\n'
    pieces = [_byte_token(m, b) for b in SNAKE.encode()]
    steered = Steered(m, [*pieces, _end_token(m)])
    r = generate(steered, left, right, DecodeOptions(mode=mode, max_tokens=8), target=target)
    assert (r.middle, r.stop_reason, r.tokens) == (SNAKE, "eos", 4)
    # cut off after the first byte: nothing of the character comes out
    m.cache.reset()
    steered = Steered(m, pieces[:1])
    stop = lambda: bool(steered.appended)  # noqa: E731
    r = generate(steered, left, right, DecodeOptions(mode=mode, max_tokens=8), target=target,
                 cancel=stop)  # fmt: skip
    assert (r.middle, r.stop_reason, r.tokens) == ("", "cancelled", 1)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_constrained_end_waits_for_a_whole_character(
    family_model: Get, name: str, target: tuple[int, int], ast_accepts: Callable[[str], bool]
) -> None:
    m = family_model(name).model
    left, right = 'name = "a ', '"\n'
    steered = Steered(m, [_byte_token(m, SNAKE.encode()[0]), _end_token(m)])
    r = generate(steered, left, right, DecodeOptions(max_tokens=6), target=target)
    assert len(steered.appended) >= 2 and "\ufffd" not in r.middle
    if r.complete:
        assert ast_accepts(left + r.middle + right)


@pytest.mark.parametrize("name", NO_FIM_FAMILIES)
def test_no_fim_prompt_and_middle(
    family_model: Get, name: str, target: tuple[int, int], ast_accepts: Callable[[str], bool]
) -> None:
    m = family_model(name).model
    left, right = "def f(x):\n    return x + (", ")\n\n\nprint(f(1))\n"
    steered = Steered(m, mute_empty=True)
    r = generate(steered, left, right, DecodeOptions(max_tokens=8), target=target)
    ft = m.fim_tokens
    assert steered.prompts == [[ft.bos, *m.tokenize(left)]]
    if r.complete:
        assert ast_accepts(left + r.middle + right)


@pytest.mark.xfail(
    strict=True,
    reason="llama.cpp marks every token whose text is '</s>' as end of generation; in "
    "Qwen's byte-level vocabulary 128247 is the ordinary text '</s>' (an HTML tag), so "
    "a Qwen model can never write it and ends the middle instead",
)
def test_qwen_writes_the_text_slash_s(family_model: Get, target: tuple[int, int]) -> None:
    m = family_model("qwen2.5-coder").model
    left, right = 'html = "<s>x', '"\n'
    steered = Steered(m, [128247, _end_token(m)])
    r = generate(steered, left, right, DecodeOptions(max_tokens=4), target=target)
    assert r.middle == "</s>"
