"""FIM model families: which special tokens a vocabulary has and how its prompts are laid out.

Code models mark the prefix, the suffix and the middle with their own special tokens
(``<fim_prefix>`` for StarCoder, ``<|fim_prefix|>`` for Qwen, ``<PRE>`` for CodeLlama,
``[PREFIX]`` for Codestral, ...) and differ in the order of the pieces.  llama.cpp
reports most of these ids, but misses some (Codestral's, StarCoder2's repository and
file separators, CodeLlama's end-of-infill).  Detection here works from two questions
any vocabulary can answer, whether llama.cpp holds it in process or a server describes
it: the id llama.cpp reports for a kind, and the id of a special token with a given
text.  Everything else is plain data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "FIM_KINDS",
    "FimLayout",
    "FimTokens",
    "assemble_prompt",
    "choose_layout",
    "find_fim_tokens",
    "stop_tokens",
]

#: The FIM marker kinds, in the names llama.cpp's ``llama_vocab_fim_*`` functions use.
FIM_KINDS = ("pre", "suf", "mid", "pad", "rep", "sep")

#: Prompt orders; see :class:`FimLayout`.
Order = Literal["psm", "spm", "sp", "none"]


@dataclass(frozen=True)
class FimTokens:
    """Special token ids of a model; None where the vocabulary has no such token."""

    pre: int | None
    suf: int | None
    mid: int | None
    pad: int | None
    rep: int | None
    sep: int | None
    eot: int | None
    eos: int | None
    bos: int | None

    @property
    def markers(self) -> tuple[int | None, ...]:
        """The FIM markers: prefix, suffix, middle, padding, repository, file separator."""
        return (self.pre, self.suf, self.mid, self.pad, self.rep, self.sep)


@dataclass(frozen=True)
class FimLayout:
    """How a FIM prompt is laid out for one model family.

    ``order`` is "psm" (pre prefix suf suffix mid), "spm" (suf suffix pre prefix mid: the
    opt-in ``spm_infill`` layout of llama.cpp's server, whose suffix-first order keeps the
    KV cache across keystrokes), "sp" (Codestral: suf suffix pre prefix, no middle token) or
    "none" (no FIM tokens: the prompt is the prefix alone). ``suffix_no_space`` tokenizes the
    suffix without SentencePiece's dummy leading space, as CodeLlama's and Mistral's reference
    code do (``encode_infilling``).
    """

    family: str
    order: Order
    add_bos: bool
    suffix_no_space: bool = False

    @property
    def has_fim(self) -> bool:
        """Whether prompts carry the suffix."""
        return self.order != "none"


# FIM_PRE token text -> family, checked against what llama.cpp detected (llama-vocab.cpp).
_FAMILIES: dict[str, str] = {
    "<fim_prefix>": "starcoder",  # StarCoder, StarCoder2, SantaCoder, Refact, Granite
    "<|fim_prefix|>": "qwen",  # Qwen2.5-Coder, Qwen3-Coder
    "<｜fim▁begin｜>": "deepseek",  # DeepSeek-Coder (V1 and V2)
    "<PRE>": "codellama",
    "▁<PRE>": "codellama",
    "[PREFIX]": "codestral",  # Mistral's [SUFFIX]suffix[PREFIX]prefix; llama.cpp misses it
}
# Texts llama.cpp does not look for but these families use (StarCoder2 names repo/file
# separators differently from Qwen; CodeLlama's end-of-infill token carries a "▁").
_EXTRA_TEXTS: dict[str, tuple[str, ...]] = {
    "pre": ("[PREFIX]",),
    "suf": ("[SUFFIX]",),
    "mid": ("[MIDDLE]",),
    "rep": ("<repo_name>", "<|repo_name|>", "<reponame>"),
    "sep": ("<file_sep>", "<|file_sep|>"),
    "eot": ("<EOT>", "▁<EOT>", "<|EOT|>"),
}


def find_fim_tokens(
    reported: Callable[[str], int | None], special_id: Callable[[str], int | None]
) -> FimTokens:
    """The model's special tokens.

    ``reported(kind)`` is the id llama.cpp reports for ``kind`` (one of :data:`FIM_KINDS`,
    "eot", "eos", "bos"), ``special_id(text)`` the id of the special token spelled
    ``text``; each returns None where there is none.  Kinds llama.cpp leaves out are
    looked up by the texts their families use.
    """
    found = {kind: reported(kind) for kind in (*FIM_KINDS, "eot")}
    for kind, texts in _EXTRA_TEXTS.items():
        if found[kind] is None:
            found[kind] = next((i for t in texts if (i := special_id(t)) is not None), None)
    return FimTokens(eos=reported("eos"), bos=reported("bos"), **found)


def choose_layout(
    tokens: FimTokens, token_text: Callable[[int], str], add_bos: bool, spm_infill: bool = False
) -> FimLayout:
    """The family and prompt layout for a model with ``tokens``.

    ``add_bos``: whether the vocabulary asks for a BOS token (and has one);
    ``spm_infill``: prefer the suffix-first order where the family allows both.
    """
    if tokens.pre is None or tokens.suf is None:
        return FimLayout("none", "none", add_bos)
    family = _FAMILIES.get(token_text(tokens.pre), "generic")
    if family == "codestral":
        return FimLayout(family, "sp", add_bos, suffix_no_space=True)
    if tokens.mid is None:
        return FimLayout("none", "none", add_bos)
    order: Order = "spm" if spm_infill else "psm"
    return FimLayout(family, order, add_bos, suffix_no_space=family == "codellama")


def assemble_prompt(
    layout: FimLayout, tokens: FimTokens, prefix: list[int], suffix: list[int]
) -> list[int]:
    """The prompt's token ids from the tokenized prefix and suffix.

    PSM families (StarCoder, Qwen, DeepSeek, CodeLlama, generic): ``[BOS] <pre> prefix
    <suf> suffix <mid>``; Codestral: ``[BOS] [SUFFIX] suffix [PREFIX] prefix``; a model
    without FIM tokens: ``[BOS] prefix``. BOS only where the vocabulary asks for it.
    """
    out: list[int] = [tokens.bos] if layout.add_bos and tokens.bos is not None else []
    pre, suf, mid = tokens.pre, tokens.suf, tokens.mid
    if layout.order == "none" or pre is None or suf is None:
        return out + prefix
    if layout.order == "sp":
        return [*out, suf, *suffix, pre, *prefix]
    assert mid is not None
    if layout.order == "spm":
        return [*out, suf, *suffix, pre, *prefix, mid]
    return [*out, pre, *prefix, suf, *suffix, mid]


def stop_tokens(tokens: FimTokens) -> frozenset[int]:
    """Ids that end a middle besides llama.cpp's own end-of-generation set: EOS, EOT and
    the FIM markers, which a FIM model writes only when it is done."""
    return frozenset(t for t in (*tokens.markers, tokens.eot, tokens.eos) if t is not None)
