"""Every FIM family end to end through llama.cpp, on its real vocabulary.

For each family of ``testmodels.tiny_families`` (a tiny random model with the
family's published tokenizer): what ``FimModel`` detects (FIM tokens, prompt layout,
end-of-generation tokens), the exact prompt tokens against the family's reference
layout, and, through ``generate``: every end token ends a middle, token healing writes
the healed word again, a character cut into byte tokens is held back until whole, and
the no-FIM path. SentencePiece's '▁' spaces and byte-fallback tokens (``<0xF0>``) must
come out as the bytes they stand for.

Where llama.cpp's own reading of a vocabulary is wrong for a family (Mellum's layout and
``<filename>``, the ordinary text ``</s>`` in Qwen's vocabulary), the tests say what the
family's reference code does.
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
from model_fixtures import model_cache, syntax_options  # noqa: F401
from test_completion import Steered

from lsp_server.decoding import generate
from lsp_server.model.families import FimTokens, assemble_prompt, choose_layout
from lsp_server.model.local.llm import FimModel
from lsp_server.modes import Mode
from testmodels.tiny_families import FAMILIES

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
    "mellum": ("mellum", "spm_infill", False, False),
    "llama3": ("none", "none", True, False),
    "gemma": ("none", "none", True, False),
}

#: Ordinary text tokens llama.cpp ends generation at for their spelling ('</s>').
ORDINARY_ENDS = {"qwen2.5-coder": {128247}, "qwen3": {128247}}

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


def test_mellum_prompt_is_suffix_first(family_model: Get) -> None:
    """Mellum is trained suffix first after the file's path: <filename>path<fim_suffix>
    suffix<fim_prefix>prefix<fim_middle> (JetBrains/mellum-sdk MellumCompletionService);
    without a path the file name marker still comes first."""
    m = family_model("mellum").model
    ft = m.fim_tokens
    filename = m.tokenize("<filename>", parse_special=True)
    assert len(filename) == 1 and ft.file == filename[0]
    a, b = m.tokenize("a = 1\n"), m.tokenize("b = 2\n")
    assert m.build_fim_prompt("a = 1\n", "b = 2\n") == [ft.file, ft.suf, *b, ft.pre, *a, ft.mid]
    path = m.tokenize("src/app.py")
    prompt = m.build_fim_prompt("a = 1\n", "b = 2\n", path="src/app.py")
    assert prompt == [ft.file, *path, ft.suf, *b, ft.pre, *a, ft.mid]


def test_mellum_path_counts_against_the_window(family_model: Get) -> None:
    m = family_model("mellum").model
    prefix = "".join(f"value_{i} = {i}\n" for i in range(300))
    path = "/".join(["deeply", "nested", "package"] * 8) + "/module.py"
    budget = m.prompts.window_budget(64)
    overhead = len(assemble_prompt(m.layout, m.fim_tokens, [], []))
    prompt = m.build_fim_prompt(prefix, "", max_new_tokens=64, path=path)
    assert len(prompt) <= budget + overhead
    assert prompt[1 : 1 + len(m.tokenize(path))] == m.tokenize(path)


def test_mellum_stops_at_the_next_file(family_model: Get) -> None:
    """Mellum's middle ends where the next file starts: <filename>, as StarCoder2 models
    stop at <file_sep>."""
    m = family_model("mellum").model
    filename = m.tokenize("<filename>", parse_special=True)
    assert len(filename) == 1 and m.eog(filename[0])


@pytest.mark.parametrize("name", ["qwen2.5-coder", "deepseek-coder"])
def test_suffix_first_falls_back_to_psm(family_path: Callable[[str], Path], name: str) -> None:
    """Families trained prefix first only keep PSM when suffix first is asked for."""
    with FimModel(family_path(name), n_ctx=256, spm_infill=True) as m:
        assert m.layout.order == "psm"
        ft = m.fim_tokens
        assert m.build_fim_prompt("a = 1\n", "")[-1] == ft.mid


def test_suffix_first_of_an_unknown_family_is_llama_cpps() -> None:
    """A family whose training is not known gets llama.cpp's spm_infill order."""
    tokens = FimTokens(pre=1, suf=2, mid=3, pad=None, rep=None, sep=None, eot=None, eos=0,
                       bos=None)  # fmt: skip
    texts = {1: "<|code_prefix|>", 2: "<|code_suffix|>", 3: "<|code_middle|>"}
    layout = choose_layout(tokens, texts.__getitem__, add_bos=False, spm_infill=True)
    assert (layout.family, layout.order) == ("generic", "spm_infill")
    assert assemble_prompt(layout, tokens, [10], [20]) == [2, 20, 1, 10, 3]


@pytest.mark.parametrize("name", ["starcoder2", "codellama"])
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
    # FimModel also stops at the FIM markers, the file name marker, the end of text and
    # the end of turn, and not at ordinary text llama.cpp ends at for its spelling
    ft = m.fim_tokens
    ends = {t for t in (*fam.spec.fim.values(), ft.file, ft.eot, ft.eos) if t is not None}
    ordinary = ORDINARY_ENDS.get(name, set())
    assert m.vocab.ordinary_ids == ordinary
    assert set(m.eog_ids) == (set(fam.spec.eog) - ordinary) | ends
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
    if order == "spm_infill":  # Mellum: the file name marker, with no path given
        assert ft.file is not None
        return [*bos, ft.file, ft.suf, *suf, ft.pre, *pre, ft.mid]
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
        suffix_first = m.layout.order in ("sp", "spm_infill")
        end = expected.index(ft.pre or -1) if suffix_first else len(expected) - 1
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
    left, right = "x = 1\n", "y = 2\n"  # complete with or without a line between
    # One token per character: every vocabulary has them, whatever its word pieces.
    line = [fam.model.vocab_bytes.index(c.encode()) for c in "z = 3\n"]
    for token in sorted(fam.model.eog_ids):
        for mode in ("constrained", "unconstrained"):
            options = syntax_options(mode=mode, max_tokens=len(line) + 2)
            r = generate(Steered(fam.model, [*line, token]), left, right, options, target=target)
            # A model that never sees the code after the cursor stops where the middle
            # connects to it, before its end token.
            ends = ("eos",) if fam.model.has_fim or mode == "unconstrained" else ("connected",)
            assert (r.middle, r.tokens) == ("z = 3\n", len(line)), (token, mode)
            assert r.stop_reason in ends, (token, mode)
            # An end before any text: the raw model's answer is empty; constrained
            # decoding never ends on blanks alone, which are no suggestion.
            r = generate(Steered(fam.model, [token]), left, right, options, target=target)
            if mode == "constrained":
                assert r.middle.strip() or r.stop_reason != "eos", (token, mode)
            else:
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
    r = generate(steered, HEAL_LEFT, HEAL_RIGHT, syntax_options(mode=mode, max_tokens=4),
                 target=target)  # fmt: skip
    assert r.healed == healed
    assert steered.prompt_texts == [(HEAL_LEFT[: -len(healed)], HEAL_RIGHT)]
    # steering may stop right after the token that completes the middle, which the model
    # then never reads: the constrained decoder's record holds every token it took
    taken = r.token_ids if mode == "constrained" else steered.appended
    assert taken[: len(steered.appended)] == steered.appended
    generated = m.vocab.detokenize(taken).decode("utf-8", errors="replace")
    assert generated.startswith(healed) and generated[len(healed) :].startswith(r.middle)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_token_healing_looks_beyond_the_top_k(
    family_model: Get, name: str, target: tuple[int, int]
) -> None:
    m = family_model(name).model
    for mode in ("constrained", "unconstrained"):
        m.cache.reset()
        steered = Steered(m, eog_bias=-1e4, mute_empty=True)
        options = syntax_options(mode=mode, max_tokens=3, top_k=5)
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
    r = generate(steered, left, right, syntax_options(mode=mode, max_tokens=8), target=target)
    assert (r.middle, r.stop_reason, r.tokens) == (SNAKE, "eos", 4)
    # cut off after the first byte: nothing of the character comes out
    m.cache.reset()
    steered = Steered(m, pieces[:1])
    stop = lambda: bool(steered.appended)  # noqa: E731
    r = generate(steered, left, right, syntax_options(mode=mode, max_tokens=8), target=target,
                 cancel=stop)  # fmt: skip
    assert (r.middle, r.stop_reason, r.tokens) == ("", "cancelled", 1)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_constrained_end_waits_for_a_whole_character(
    family_model: Get, name: str, target: tuple[int, int], ast_accepts: Callable[[str], bool]
) -> None:
    m = family_model(name).model
    left, right = 'name = "a ', '"\n'
    steered = Steered(m, [_byte_token(m, SNAKE.encode()[0]), _end_token(m)])
    r = generate(steered, left, right, syntax_options(max_tokens=6), target=target)
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
    r = generate(steered, left, right, syntax_options(max_tokens=8), target=target)
    ft = m.fim_tokens
    assert steered.prompts == [[ft.bos, *m.tokenize(left)]]
    if r.complete:
        assert ast_accepts(left + r.middle + right)


@pytest.mark.parametrize("name", sorted(ORDINARY_ENDS))
def test_qwen_writes_the_text_slash_s(
    family_model: Get, target: tuple[int, int], name: str
) -> None:
    """llama.cpp marks every token spelled '</s>' as end of generation; in Qwen's
    byte-level vocabulary 128247 is the ordinary text '</s>' (an HTML tag): the model
    writes it."""
    m = family_model(name).model
    assert m.vocab.token_bytes[128247] == b"</s>" and not m.eog(128247)
    left, right = 'html = "<s>x', '"\n'
    for mode in ("constrained", "unconstrained"):
        steered = Steered(m, [128247, _end_token(m)])
        r = generate(steered, left, right, syntax_options(mode=mode, max_tokens=4), target=target)
        assert (r.middle, r.stop_reason) == ("</s>", "eos"), mode
