"""The model's vocabulary as a remote backend sees it: FIM markers, end tokens, id lookup.

A server does not say which of its tokens are FIM markers, so they are found by text, as
llama.cpp itself finds them when a GGUF does not name them (``llama-vocab.cpp``), plus the
texts ``FimModel`` adds: the same ``FimTokens`` the in-process backend detects.  The
texts come from the server (llama-server's ``/tokenize`` with ``with_pieces`` renders any
list of ids, special tokens as their text) or from a local copy of the vocabulary (any
GGUF, loaded vocabulary-only: the ``modelVocab`` setting), which also maps the token
texts of OpenAI-style answers back to ids.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelError
from ..families import FimTokens
from ..native import library

__all__ = ["SPECIAL_TEXTS", "ServerVocab", "load_local_vocab"]

#: Token texts that mark each kind of special token, most specific first: llama.cpp's
#: lists (``llama_vocab::impl::load``) and the extra ones ``FimModel`` looks for.
SPECIAL_TEXTS: Mapping[str, tuple[str, ...]] = {
    "pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
            "▁<PRE>", "<|code_prefix|>", "<|prefix|>", "[PREFIX]"),
    "suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
            "▁<SUF>", "<|code_suffix|>", "<|suffix|>", "[SUFFIX]"),
    "mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
            "▁<MID>", "<|code_middle|>", "<|middle|>", "[MIDDLE]"),
    "pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
            "<repo_name>"),
    "sep": ("<|file_sep|>", "<file_sep>"),
    "eot": ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
            "<end_of_utterance>", "▁<EOT>", "<|EOT|>"),
}  # fmt: skip
#: Texts llama.cpp treats as end of generation wherever they occur in a vocabulary.
EOG_TEXTS: frozenset[str] = frozenset(
    ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
     "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
     "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
     "<｜end▁of▁sentence｜>", "[e~[")
)  # fmt: skip


def _text(piece: bytes) -> str | None:
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class ServerVocab:
    """A model's vocabulary: every token's bytes (special tokens as their text) and what
    the decoder needs from it, found the way the in-process backend finds it."""

    pieces: tuple[bytes, ...]
    fim: FimTokens
    eog: frozenset[int]
    add_bos: bool
    space_prefix: bool
    _ids: Mapping[str, int] = field(repr=False, compare=False, default_factory=dict)
    _ambiguous: frozenset[str] = field(repr=False, compare=False, default=frozenset())

    @property
    def n_vocab(self) -> int:
        return len(self.pieces)

    @classmethod
    def from_pieces(
        cls,
        pieces: Sequence[bytes],
        *,
        eos: int | None,
        bos: int | None,
        add_bos: bool,
        space_prefix: bool,
    ) -> ServerVocab:
        """Detect FIM markers and end tokens from every token's text."""
        ids: dict[str, int] = {}
        ambiguous: set[str] = set()
        for token, piece in enumerate(pieces):
            text = _text(piece)
            if text is None:
                continue  # part of a UTF-8 character: never a whole token text
            if text in ids:
                ambiguous.add(text)
            else:
                ids[text] = token

        def find(kind: str) -> int | None:
            return next((ids[t] for t in SPECIAL_TEXTS[kind] if t in ids), None)

        found = {kind: find(kind) for kind in SPECIAL_TEXTS}
        fim = FimTokens(eos=eos, bos=bos, file=ids.get("<filename>"), **found)
        stops = {*fim.markers, fim.eot, fim.eos}
        eog = {ids[t] for t in EOG_TEXTS if t in ids} | {t for t in stops if t is not None}
        return cls(
            tuple(pieces),
            fim,
            frozenset(eog),
            add_bos and bos is not None,
            space_prefix,
            ids,
            frozenset(ambiguous),
        )

    def special_id(self, text: str) -> int | None:
        """Id of the token whose text is exactly ``text``."""
        return self._ids.get(text)

    def token_bytes(self, token: int) -> bytes:
        return self.pieces[token]

    def resolve(self, text: str) -> int | None:
        """Id of the token an OpenAI-style answer spells ``text``; None when no token or
        several tokens have that text (then the answer cannot say which one was meant).
        Servers spell bytes that are not whole characters as U+FFFD or nothing, so texts
        with U+FFFD and the empty text name no token."""
        if not text or "\ufffd" in text or text in self._ambiguous:
            return None
        return self._ids.get(text)


def vocab_from_server_answers(
    pieces: Sequence[Any],
    props: Mapping[str, Any],
    first_of_a: Sequence[int],
    first_of_a_special: Sequence[int],
) -> ServerVocab:
    """A ``ServerVocab`` from llama-server's answers: ``/tokenize`` with ``with_pieces`` of
    every id, ``/props`` (its ``bos_token``/``eos_token`` texts) and ``/tokenize`` of "a"
    without and with ``add_special``."""
    table = tuple(p.encode("utf-8") if isinstance(p, str) else bytes(p) for p in pieces)
    by_text: dict[bytes, int] = {}
    for token, piece in enumerate(table):
        by_text.setdefault(piece, token)

    def named(key: str) -> int | None:
        text = props.get(key)
        return by_text.get(text.encode("utf-8")) if isinstance(text, str) and text else None

    bos, eos = named("bos_token"), named("eos_token")
    add_bos = (
        bool(first_of_a_special)
        and first_of_a_special[0] == bos
        and (not first_of_a or first_of_a[0] != bos)
    )
    space_prefix = b"".join(table[t] for t in first_of_a if 0 <= t < len(table)) == b" a"
    return ServerVocab.from_pieces(
        table, eos=eos, bos=bos, add_bos=add_bos, space_prefix=space_prefix
    )


def load_local_vocab(path: str | os.PathLike[str]) -> ServerVocab:
    """The vocabulary of a local GGUF (a vocabulary-only file or a whole model), loaded
    through llama.cpp without weights: the ``modelVocab`` setting."""
    lib = library()
    params = lib.llama_model_default_params()
    params.vocab_only = True
    model = lib.llama_model_load_from_file(os.fsencode(path), params)
    if not model:
        raise ModelError(f"cannot load the vocabulary of {path}: not a GGUF model or vocabulary")
    try:
        vocab = lib.llama_model_get_vocab(model)
        n_vocab = lib.llama_vocab_n_tokens(vocab)
        buf = ctypes.create_string_buffer(256)
        pieces: list[bytes] = []
        for token in range(n_vocab):
            n = lib.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
            if n < 0:
                big = ctypes.create_string_buffer(-n)
                n = lib.llama_token_to_piece(vocab, token, big, -n, 0, True)
                pieces.append(big.raw[:n])
            else:
                pieces.append(buf.raw[:n])

        def tokenize(text: bytes) -> list[int]:
            out = (lib.llama_token * 16)()
            n = lib.llama_tokenize(vocab, text, len(text), out, 16, False, False)
            return list(out[: max(0, n)])

        def token_or_none(value: int) -> int | None:
            return value if 0 <= value < n_vocab else None

        space_prefix = b"".join(pieces[t] for t in tokenize(b"a")) == b" a"
        bos = token_or_none(lib.llama_vocab_bos(vocab))
        return ServerVocab.from_pieces(
            pieces,
            eos=token_or_none(lib.llama_vocab_eos(vocab)),
            bos=bos,
            add_bos=bool(lib.llama_vocab_get_add_bos(vocab)),
            space_prefix=space_prefix,
        )
    finally:
        lib.llama_model_free(model)
