"""The FIM families the tiny test models stand in for, and where each detail comes from.

Each family takes one of llama.cpp's vocabulary-only GGUF files (vendored in the
llama-cpp-python source distribution) and edits its special tokens so that the result
is what ``convert_hf_to_gguf.py`` writes for the real model: the same token texts at
the same ids, the same token types (a token that looks special, ``<|...|>`` or
``<｜...｜>``, becomes CONTROL; other added tokens USER_DEFINED; ids the tokenizer does
not define become ``[PAD<id>]`` user-defined tokens), and the same ``tokenizer.ggml.*``
ids. No conversion writes ``tokenizer.ggml.fim_*_token_id``: llama.cpp finds FIM tokens
by their text when it loads the model, and so it does for these stand-ins.

This module is data only; ``testmodels.tiny`` applies it (``python -m
testmodels.tiny --list`` prints it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CONTROL", "FAMILIES", "NORMAL", "USER_DEFINED", "ControlBlock", "Family", "Token"]

# llama_token_type, as tokenizer.ggml.token_type stores it.
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4


@dataclass(frozen=True)
class Token:
    """A token the family's published tokenizer has at ``id`` (it replaces what the
    base vocabulary has there, or extends the vocabulary)."""

    id: int
    text: str
    type: int = CONTROL


@dataclass(frozen=True)
class ControlBlock:
    """``count`` control tokens inserted before id ``at`` (later ids shift up), named
    ``pattern`` with ``{n}`` = id - at + 1: Mistral's v3 SentencePiece vocabulary put
    768 ``[control_n]`` tokens after ``</s>``."""

    at: int
    count: int
    pattern: str


@dataclass(frozen=True)
class Family:
    """A model family's tokenizer as a tiny test model reproduces it.

    What the tests check on the built model: ``fim``, the FIM token ids by kind that
    ``FimModel`` finds (llama.cpp's detection, plus texts it does not look for, such as
    StarCoder2's ``<repo_name>``); ``eog``, llama.cpp's end-of-generation ids.
    ``layout`` is the prompt the family's models were trained on, from reference code.
    """

    name: str
    vocab: str
    models: str
    layout: str
    fim: Mapping[str, int]
    eog: tuple[int, ...]
    tokens: tuple[Token, ...] = ()
    controls: ControlBlock | None = None
    metadata: Mapping[str, int | bool | str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    fidelity: str = ""

    @property
    def has_fim(self) -> bool:
        return "pre" in self.fim and "suf" in self.fim


def _control(start: int, *texts: str) -> tuple[Token, ...]:
    return tuple(Token(start + i, text) for i, text in enumerate(texts))


# Qwen2.5's added tokens (151643-151645 are in the vendored Qwen vocabulary already).
_QWEN25 = (
    *_control(151646, "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
              "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
              "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"),
    Token(151657, "<tool_call>", USER_DEFINED),
    Token(151658, "</tool_call>", USER_DEFINED),
    *_control(151659, "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
              "<|repo_name|>", "<|file_sep|>"),
)  # fmt: skip
_QWEN_FIM = {"pre": 151659, "suf": 151661, "mid": 151660, "pad": 151662, "rep": 151663,
             "sep": 151664}  # fmt: skip
# llama.cpp marks every token whose text is "</s>" as end of generation (for PaddleOCR);
# in Qwen's byte-level vocabulary that is the ordinary text token 128247.
_QWEN_EOG = (128247, 151643, 151645, 151662, 151663, 151664)
_QWEN_SOURCES = (
    "vocabulary: ggml-vocab-qwen2.gguf, converted by llama.cpp from Qwen/Qwen1.5-7B "
    "(conversion/base.py: get_vocab_base_pre 'qwen2'); Qwen2, Qwen2.5 and Qwen3 keep that "
    "byte-level BPE and only add tokens after 151645",
    "added tokens 151646-151664: Qwen2.5 tokenizer_config.json added_tokens_decoder; FIM "
    "ids 151659-151664 as listed in QwenLM/Qwen2.5-Coder README.md (commit b3506850)",
    "types: convert_hf_to_gguf does_token_look_special makes <|...|> CONTROL, "
    "<tool_call>/</tool_call> (special: false) USER_DEFINED",
)

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            name="starcoder2",
            vocab="starcoder",
            models="StarCoder2 3B/7B/15B (bigcode/starcoder2-*)",
            layout="psm: <fim_prefix>prefix<fim_suffix>suffix<fim_middle>; repository "
            "level: <repo_name>name<file_sep>path\\ncode...",
            fim={"pre": 1, "suf": 3, "mid": 2, "pad": 4, "rep": 5, "sep": 6},
            eog=(0, 4),
            sources=(
                "vocabulary: ggml-vocab-starcoder.gguf (bundled), converted by llama.cpp "
                "from bigcode/starcoder2-3b (conversion/base.py: 'starcoder'); StarCoder2's "
                "38 special tokens at ids 0-37 unchanged",
            ),
            fidelity="exact: the published StarCoder2 tokenizer",
        ),
        Family(
            name="qwen2.5-coder",
            vocab="qwen2",
            models="Qwen2.5-Coder 0.5B-32B base (instruct: eos <|im_end|> 151645)",
            layout="psm: <|fim_prefix|>prefix<|fim_suffix|>suffix<|fim_middle|>; repository "
            "level: <|repo_name|>name\\n<|file_sep|>path\\ncode...",
            fim=_QWEN_FIM,
            eog=_QWEN_EOG,
            tokens=_QWEN25,
            metadata={
                "bos_token_id": 151643,
                "eos_token_id": 151643,
                "padding_token_id": 151643,
                "add_bos_token": False,
            },
            sources=_QWEN_SOURCES,
            fidelity="exact: Qwen2.5-Coder's tokenizer",
        ),
        Family(
            name="qwen3",
            vocab="qwen2",
            models="Qwen3 0.6B-32B (post-trained; base models: eos <|endoftext|> 151643)",
            layout="no FIM training documented, but the vocabulary carries Qwen2.5-Coder's "
            "FIM tokens at the same ids, so llama.cpp (and fimlsp) see a FIM model",
            fim=_QWEN_FIM,
            eog=_QWEN_EOG,
            tokens=(
                *_QWEN25,
                Token(151665, "<tool_response>", USER_DEFINED),
                Token(151666, "</tool_response>", USER_DEFINED),
                Token(151667, "<think>", USER_DEFINED),
                Token(151668, "</think>", USER_DEFINED),
            ),
            metadata={
                "bos_token_id": 151643,
                "eos_token_id": 151645,
                "padding_token_id": 151643,
                "add_bos_token": False,
            },
            sources=(
                *_QWEN_SOURCES,
                "151665-151668: Qwen3 tokenizer_config.json (<tool_response>, "
                "</tool_response>, <think>, </think>, special: false)",
            ),
            fidelity="exact: Qwen3's tokenizer",
        ),
        Family(
            name="deepseek-coder",
            vocab="deepseek-coder",
            models="DeepSeek-Coder 1.3B/6.7B/33B base (V1)",
            layout="psm: <｜begin▁of▁sentence｜><｜fim▁begin｜>prefix<｜fim▁hole｜>suffix"
            "<｜fim▁end｜>",
            fim={"pre": 32016, "suf": 32015, "mid": 32017},
            eog=(32014,),
            tokens=(
                *_control(
                    32015,
                    "<｜fim▁hole｜>",
                    "<｜fim▁begin｜>",
                    "<｜fim▁end｜>",
                    "<pad>",
                    "<|User|>",
                    "<|Assistant|>",
                    "<|EOT|>",
                ),
            ),
            sources=(
                "vocabulary: ggml-vocab-deepseek-coder.gguf, converted by llama.cpp from "
                "deepseek-ai/deepseek-coder-6.7b-base: ids 32013-32021 as published",
                "types: the vendored file predates does_token_look_special and has "
                "32015-32021 USER_DEFINED; today's conversion makes them CONTROL",
            ),
            fidelity="exact: DeepSeek-Coder's tokenizer",
        ),
        Family(
            name="codellama",
            vocab="llama-spm",
            models="CodeLlama 7B/13B base and instruct (34B/70B have no infilling tokens)",
            layout="psm: <s>▁<PRE> prefix▁<SUF>suffix▁<MID> (prefix with SentencePiece's "
            "leading space, suffix without: meta-llama/codellama infilling_prompt_tokens); "
            "the middle ends with ▁<EOT>",
            fim={"pre": 32007, "suf": 32008, "mid": 32009},
            eog=(2,),
            tokens=(
                *(
                    Token(32000 + i, text, NORMAL)
                    for i, text in enumerate(
                        ("▁<SU", "▁<SUF", "▁<PRE", "▁<M", "▁<MID", "▁<E", "▁<EOT")
                    )
                ),
                *_control(32007, "▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"),
                *(Token(32011 + i, "▁" + "<EOT>" * (i + 2), NORMAL) for i in range(5)),
            ),
            sources=(
                "vocabulary: ggml-vocab-llama-spm.gguf (Llama 2's SentencePiece model, which "
                "CodeLlama extends by 16 pieces to 32016)",
                "32000-32015: CodeLlama-13b's pieces ▁<SU ... ▁<EOT><EOT><EOT><EOT><EOT><EOT>; "
                "32007-32010 ▁<PRE> ▁<SUF> ▁<MID> ▁<EOT> (llama.cpp PR 2934 quotes the same ids "
                "from meta-llama/codellama's tokenizer)",
                "llama.cpp looks for '_<EOT>' with an ASCII underscore, so it never finds "
                "▁<EOT>: its end-of-generation set is </s> alone",
            ),
            fidelity="exact for the 16 infilling pieces and Llama 2's 32000; the scores of "
            "the 12 partial pieces are set below every other piece",
        ),
        Family(
            name="codestral",
            vocab="llama-spm",
            models="Codestral 22B v0.1 (Mistral tokenizer v3, SentencePiece, 32768)",
            layout="sp: <s>[SUFFIX]suffix[PREFIX] prefix, no middle token (mistral-common "
            "encode_fim; the suffix without SentencePiece's leading space)",
            fim={"pre": 11, "suf": 13, "mid": 12},
            eog=(2,),
            controls=ControlBlock(at=3, count=768, pattern="[control_{n}]"),
            tokens=_control(
                3,
                "[INST]",
                "[/INST]",
                "[TOOL_CALLS]",
                "[AVAILABLE_TOOLS]",
                "[/AVAILABLE_TOOLS]",
                "[TOOL_RESULTS]",
                "[/TOOL_RESULTS]",
            )
            + _control(11, "[PREFIX]", "[MIDDLE]", "[SUFFIX]"),
            metadata={"add_bos_token": True, "add_eos_token": False},
            sources=(
                "[PREFIX] 11 and [SUFFIX] 13, <s> 1 and the byte token <0x0A> at 781: "
                "mistralai/mistral-common tests/data/expected/fim/v3_spm.jsonl",
                "v3 layout: 768 control tokens at 3-770 ([INST] 3 ... [/TOOL_RESULTS] 9, "
                "[control_8] 10, ...), then the v1 vocabulary shifted by 768; [MIDDLE] 12 "
                "is inferred from mistral-common's SpecialTokens order, not seen in a file",
            ),
            fidelity="special and byte token ids as published; the 31741 text pieces are "
            "Llama 2's (Mistral's own SentencePiece model is not vendored), same algorithm: "
            "SentencePiece with a leading space and <0x00>-<0xFF> byte fallback",
        ),
        Family(
            name="mellum",
            vocab="starcoder",
            models="JetBrains Mellum-4b-base (and its SFT variants)",
            layout="spm with the file name first: <filename>path<fim_suffix>suffix"
            "<fim_prefix>prefix<fim_middle>; other files as <filename>path\\ncontent before "
            "it (JetBrains/mellum-sdk MellumCompletionService.kt)",
            fim={"pre": 1, "suf": 3, "mid": 2, "pad": 4, "rep": 5},
            eog=(0, 4, 5),
            tokens=(Token(5, "<reponame>"), Token(6, "<filename>")),
            metadata={"pre": "mellum"},
            sources=(
                "token texts: Mellum-4b-base special_tokens_map.json (<fim_prefix> <fim_middle> "
                "<fim_suffix> <fim_pad> <filename> <reponame> <gh_stars> ... eos/bos/pad/unk "
                "<|endoftext|>), as quoted in g0t4/ask-openai.nvim; pre-tokenizer 'mellum' "
                "(GPT-2 regex) from llama.cpp's conversion/base.py",
                "ids of Mellum-4b-base not verified; Mellum2.1's published tokenizer orders "
                "the same texts differently (<filename> 7, <fim_prefix> 8, ...)",
            ),
            fidelity="stand-in: StarCoder2's 49152-token byte-level BPE (Mellum-4b's own "
            "49152-token BPE is not vendored) with Mellum's special-token texts",
        ),
        Family(
            name="llama3",
            vocab="llama-bpe",
            models="Llama 3.1 / 3.2 base (Meta-Llama-3's tokenizer, 3.1 names)",
            layout="none: no FIM tokens, the prompt is <|begin_of_text|>prefix",
            fim={},
            eog=(128001, 128008, 128009),
            tokens=_control(128004, "<|finetune_right_pad_id|>")
            + _control(128008, "<|eom_id|>")
            + _control(128010, "<|python_tag|>"),
            metadata={"add_bos_token": True},
            sources=(
                "vocabulary: ggml-vocab-llama-bpe.gguf, converted by llama.cpp from "
                "meta-llama/Meta-Llama-3-8B",
                "128004, 128008, 128010 renamed as in Llama 3.1's tokenizer_config.json",
            ),
            fidelity="exact: Llama 3.1's tokenizer",
        ),
        Family(
            name="gemma",
            vocab="gemma-4",
            models="Gemma 4 (not Gemma 3: same 262144 size and byte fallback, but Gemma 3's "
            "tokenizer is a SentencePiece model with <start_of_turn>/<end_of_turn>)",
            layout="none: no FIM tokens, the prompt is <bos>prefix",
            fim={},
            eog=(1, 50, 106),
            sources=(
                "vocabulary: ggml-vocab-gemma-4.gguf as vendored (tokenizer.ggml.model gemma4: "
                "BPE over '▁'-spaced pieces with <0x00>-<0xFF> byte fallback)",
            ),
            fidelity="exact: Gemma 4's tokenizer",
        ),
    )
}
