"""FIM model families: which special tokens a vocabulary has and how its prompts are laid out.

Code models mark the prefix, the suffix and the middle with their own special tokens
(``<fim_prefix>`` for StarCoder, ``<|fim_prefix|>`` for Qwen, ``<PRE>`` for CodeLlama,
``[PREFIX]`` for Codestral, ...) and differ in the order of the pieces.  llama.cpp
reports most of these ids, but misses some (Codestral's, StarCoder2's repository and
file separators, CodeLlama's end-of-infill, Mellum's file name marker).  Detection here
works from questions any vocabulary can answer, whether llama.cpp holds it in process
or a server describes it: the id llama.cpp reports for a kind, the id of a special
token with a given text, and the pre-tokenizer's name (JetBrains Mellum shares
StarCoder's token texts but not its layout; its GGUF files name the pre-tokenizer
"mellum").  Everything else is plain data.

The layouts, as each family's reference code builds them:

========================  ==============================================================
``psm``                   ``<PRE> prefix <SUF> suffix <MID>`` (every FIM family)
``spm``                   ``<PRE> <SUF> suffix <MID> prefix``: suffix first as StarCoder,
                          StarCoder2 and CodeLlama were trained (the FIM paper's SPM)
``spm_infill``            ``<SUF> suffix <PRE> prefix <MID>``: llama.cpp's ``spm_infill``
                          order, for families whose training is not known; Mellum's only
                          layout, after ``<filename>path``
``sp``                    ``[SUFFIX] suffix [PREFIX] prefix``: Codestral, no middle token
``none``                  the prefix alone: no FIM tokens
========================  ==============================================================

Repository-level prompts (project context, :mod:`lsp_server.project`) go between BOS and
the FIM part, in the format the family was trained on; only two families have one:

=============  ====================================================================
``qwen``       ``<|repo_name|>name\n<|file_sep|>path\ncontent ... <|file_sep|>path\n``
               then the FIM part (Qwen2.5-Coder technical report, section 3.1)
``starcoder``  ``<repo_name>name<file_sep>path\ncontent ... <file_sep>path\n``
               (StarCoder2 paper, section 5; StarCoder 1 has no ``<file_sep>``)
=============  ====================================================================

With ``spm_infill`` asked for (suffix first keeps the KV cache across keystrokes, the
prefix being the part that changes), StarCoder and CodeLlama get ``spm``, families
trained only prefix first (Qwen2.5-Coder, DeepSeek-Coder) keep ``psm``.

Qwen3's published tokenizer carries Qwen2.5-Coder's FIM tokens at the same ids, and
llama.cpp finds them; Qwen documents FIM training for its Coder models only.  fimlsp
treats any vocabulary with FIM tokens as a FIM model, as llama.cpp's ``/infill`` does:
for a general Qwen3 model the prompt carries the suffix, and the quotient parser still
decides where the middle ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "FIM_KINDS",
    "FimLayout",
    "FimTokens",
    "RepoFormat",
    "assemble_prompt",
    "choose_layout",
    "detected",
    "find_fim_tokens",
    "repo_header",
    "stop_tokens",
]

#: The FIM marker kinds, in the names llama.cpp's ``llama_vocab_fim_*`` functions use.
FIM_KINDS = ("pre", "suf", "mid", "pad", "rep", "sep")

#: Prompt orders; see :class:`FimLayout`.
Order = Literal["psm", "spm", "spm_infill", "sp", "none"]
#: Repository-level formats; see the module docstring ("": the family has none).
RepoFormat = Literal["", "qwen", "starcoder"]


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
    #: ``<filename>``: what starts a file (Mellum's prompts; StarCoder's repository data).
    file: int | None = None

    @property
    def markers(self) -> tuple[int | None, ...]:
        """The FIM markers: prefix, suffix, middle, padding, repository, file separator,
        file name."""
        return (self.pre, self.suf, self.mid, self.pad, self.rep, self.sep, self.file)


@dataclass(frozen=True)
class FimLayout:
    """How a FIM prompt is laid out for one model family.

    ``order`` is one of the layouts in the module docstring.  ``suffix_no_space``
    tokenizes the suffix without SentencePiece's dummy leading space, as CodeLlama's and
    Mistral's reference code do (``encode_infilling``).  ``file_header``: the prompt
    starts with ``<filename>`` and the file's path (Mellum).  ``repo``: the family's
    repository-level format, where it has one and the vocabulary its tokens.
    """

    family: str
    order: Order
    add_bos: bool
    suffix_no_space: bool = False
    file_header: bool = False
    repo: RepoFormat = ""

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
#: The order each family gets when the suffix-first layout is asked for.
_SUFFIX_FIRST: dict[str, Order] = {"starcoder": "spm", "codellama": "spm", "qwen": "psm",
                                   "deepseek": "psm"}  # fmt: skip


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
    return FimTokens(eos=reported("eos"), bos=reported("bos"), file=special_id("<filename>"),
                     **found)  # fmt: skip


def choose_layout(
    tokens: FimTokens,
    token_text: Callable[[int], str],
    add_bos: bool,
    spm_infill: bool = False,
    pre: str | None = None,
) -> FimLayout:
    """The family and prompt layout for a model with ``tokens``.

    ``add_bos``: whether the vocabulary asks for a BOS token (and has one);
    ``spm_infill``: prefer a suffix-first order where the family was trained on one;
    ``pre``: the pre-tokenizer's name in the file (``tokenizer.ggml.pre``), if known.
    """
    if tokens.pre is None or tokens.suf is None:
        return FimLayout("none", "none", add_bos)
    family = "mellum" if pre == "mellum" else _FAMILIES.get(token_text(tokens.pre), "generic")
    if family == "codestral":
        return FimLayout(family, "sp", add_bos, suffix_no_space=True)
    if tokens.mid is None:
        return FimLayout("none", "none", add_bos)
    if family == "mellum":
        return FimLayout(family, "spm_infill", add_bos, file_header=tokens.file is not None)
    order: Order = _SUFFIX_FIRST.get(family, "spm_infill") if spm_infill else "psm"
    repo: RepoFormat = ""
    if tokens.rep is not None and tokens.sep is not None and family in ("qwen", "starcoder"):
        repo = "qwen" if family == "qwen" else "starcoder"
    return FimLayout(family, order, add_bos, suffix_no_space=family == "codellama", repo=repo)


def assemble_prompt(
    layout: FimLayout,
    tokens: FimTokens,
    prefix: list[int],
    suffix: list[int],
    path: Sequence[int] = (),
    context: Sequence[int] = (),
) -> list[int]:
    """The prompt's token ids from the tokenized prefix and suffix (and file path, for a
    layout with a file header), in the layout's order (see the module docstring).  BOS
    only where the vocabulary asks for it; ``context``, a repository-level header
    (:func:`repo_header`), right after it, so that it heads the KV cache."""
    out: list[int] = [tokens.bos] if layout.add_bos and tokens.bos is not None else []
    out += context
    pre, suf, mid = tokens.pre, tokens.suf, tokens.mid
    if layout.order == "none" or pre is None or suf is None:
        return out + prefix
    if layout.order == "sp":
        return [*out, suf, *suffix, pre, *prefix]
    assert mid is not None
    if layout.order == "spm":
        return [*out, pre, suf, *suffix, mid, *prefix]
    if layout.order == "spm_infill":
        if layout.file_header and tokens.file is not None:
            out += [tokens.file, *path]
        return [*out, suf, *suffix, pre, *prefix, mid]
    return [*out, pre, *prefix, suf, *suffix, mid]


def repo_header(
    layout: FimLayout,
    tokens: FimTokens,
    tokenize: Callable[[str], list[int]],
    name: str,
    files: Sequence[tuple[str, str]],
    current_path: str,
) -> list[int]:
    """The repository-level header in the layout's format (see the module docstring):
    the repository's name, each ``(path, text)`` of ``files``, then the current file's
    path; empty for a layout without one."""
    rep, sep = tokens.rep, tokens.sep
    if not layout.repo or rep is None or sep is None:
        return []
    out = [rep, *tokenize(name + "\n" if layout.repo == "qwen" else name)]
    for path, text in files:
        body = text if text.endswith("\n") else text + "\n"
        out += [sep, *tokenize(f"{path}\n{body}")]
    return [*out, sep, *tokenize(f"{current_path}\n")]


def stop_tokens(tokens: FimTokens) -> frozenset[int]:
    """Ids that end a middle besides llama.cpp's own end-of-generation set: EOS, EOT and
    the FIM markers, which a FIM model writes only when it is done (``<filename>``: the
    next file starts)."""
    return frozenset(t for t in (*tokens.markers, tokens.eot, tokens.eos) if t is not None)


def detected(
    layout: FimLayout, end_ids: Sequence[int], token_text: Callable[[int], str]
) -> dict[str, object]:
    """What fimlsp detected about a model, as ``fimlsp complete --json`` and
    ``fimlsp/serverStatus`` report it: the family, the prompt layout, whether a BOS
    token starts the prompt, and every token that ends a middle (id and text)."""
    return {
        "family": layout.family,
        "layout": layout.order,
        "addBos": layout.add_bos,
        "repoFormat": layout.repo or None,
        "endTokens": [{"id": t, "text": token_text(t)} for t in sorted(end_ids)],
    }
