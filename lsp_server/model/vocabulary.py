"""The tokenizer and token table of a model loaded through llama.cpp.

The constrained decoder reads every candidate token as bytes, so the whole table is
rendered once at load: ``Llama.detokenize`` of the high-level API drops tokens longer
than 32 bytes, and control tokens (FIM markers, EOS) must render as nothing.  What
llama.cpp does not report (the pre-tokenizer's name, the token types before llama.cpp
overrode them) is read from the GGUF file itself (:mod:`.gguf`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from . import gguf
from .errors import ModelError
from .families import FIM_KINDS

__all__ = ["LlamaVocabulary", "tokenize_without_dummy_space"]

#: The file's entries the vocabulary reads (``tokenizer.ggml.*``).
_FILE_KEYS = ("tokenizer.ggml.pre", "tokenizer.ggml.token_type")
#: ``llama_token_type`` of ordinary text, as ``tokenizer.ggml.token_type`` stores it.
_NORMAL = 1

#: llama.cpp's function for the id of each special-token kind.
_REPORTED = {
    **{kind: f"llama_vocab_fim_{kind}" for kind in FIM_KINDS},
    **{kind: f"llama_vocab_{kind}" for kind in ("eot", "eos", "bos")},
}


class LlamaVocabulary:
    """Token ids, their bytes and texts, and tokenization, for one loaded model.

    Valid while the model is loaded: :meth:`close` (called when the model is freed) makes
    tokenizing raise ``ModelError`` instead of reading freed memory.
    """

    def __init__(
        self, lib: ModuleType, model: Any, name: str = "the model", path: Path | None = None
    ) -> None:
        self._lib = lib
        self._buffer_types: dict[int, Any] = {}  # token array types by length
        self._vocab: Any = lib.llama_model_get_vocab(model)
        self.n_vocab: int = lib.llama_vocab_n_tokens(self._vocab)
        if self.n_vocab <= 0:
            raise ModelError(f"{name} has no vocabulary")
        piece = ctypes.create_string_buffer(256)
        self._token_bytes: list[bytes] = [self._piece(i, piece) for i in range(self.n_vocab)]
        #: Whether ``tokenize`` prepends SentencePiece's dummy space (llama, CodeLlama, ...).
        self.space_prefix = self.detokenize(self.tokenize("a")) == b" a"
        #: The pre-tokenizer's name in the file (``tokenizer.ggml.pre``): "qwen2",
        #: "mellum", ...; None when unknown.
        self.pre: str | None = None
        #: Tokens the file stores as ordinary text that llama.cpp loads as control tokens
        #: because of their text (it ends generation at any token spelled "</s>", which
        #: in Qwen's byte-level vocabulary is the HTML tag, id 128247): their bytes are
        #: their text, and they end nothing unless the metadata says so.
        self.ordinary_ids: frozenset[int] = frozenset()
        if path is not None:
            self._read_file(path, piece)

    def _read_file(self, path: Path, buf: Any) -> None:
        """What llama.cpp does not tell: the pre-tokenizer and the file's token types."""
        try:
            entries = {e.key: e for e in gguf.read_entries(path, _FILE_KEYS)}
        except (OSError, ModelError):
            return
        pre = entries.get("tokenizer.ggml.pre")
        self.pre = pre.value() if pre is not None and pre.vtype == gguf.STRING else None
        types = entries.get("tokenizer.ggml.token_type")
        if types is None or types.vtype != gguf.ARRAY or types.count != self.n_vocab:
            return
        ordinary = np.flatnonzero(types.value() == _NORMAL)
        table = self._token_bytes
        silent = [int(t) for t in ordinary.tolist() if not table[t]]
        for token in silent:
            table[token] = self._piece(token, buf, special=True)
        self.ordinary_ids = frozenset(t for t in silent if table[t])

    def close(self) -> None:
        self._vocab = None

    def _require_open(self) -> Any:
        if self._vocab is None:
            raise ModelError("model is closed")
        return self._vocab

    # ------------------------------------------------------------ the token table

    def _piece(self, token: int, buf: Any, special: bool = False) -> bytes:
        """Bytes of one token; control tokens render as b"" unless ``special``."""
        n = self._lib.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if n < 0:  # longer than the buffer: llama.cpp returns minus the size it needs
            big = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self._vocab, token, big, -n, 0, special)
            return big.raw[:n]
        return bytes(buf.raw[:n])

    @property
    def token_bytes(self) -> list[bytes]:
        """Bytes of every token id, indexed by id (shared list: do not modify)."""
        return self._token_bytes

    def token_text(self, token: int) -> str:
        """The token's raw vocabulary text (e.g. "Ġdef", "<fim_prefix>"), for diagnostics."""
        if not 0 <= token < self.n_vocab:  # llama.cpp would abort on a bad id
            raise ValueError(f"token id {token} out of range (n_vocab={self.n_vocab})")
        raw: bytes = self._lib.llama_vocab_get_text(self._require_open(), token) or b""
        return raw.decode("utf-8", errors="replace")

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        """Concatenated token bytes; may end inside a UTF-8 sequence."""
        table = self._token_bytes
        return b"".join(table[t] for t in tokens)

    # ------------------------------------------------------------ special tokens

    def reported_id(self, kind: str) -> int | None:
        """The id llama.cpp reports for ``kind``: "pre", "suf", "mid", "pad", "rep", "sep"
        (``llama_vocab_fim_*``), "eot", "eos" or "bos"; None where it has none."""
        fn: Callable[[Any], int] | None = getattr(self._lib, _REPORTED[kind], None)
        value = fn(self._require_open()) if fn is not None else -1
        return value if 0 <= value < self.n_vocab else None

    def special_id(self, text: str) -> int | None:
        """Id of the special token whose text is exactly ``text``, if the vocabulary has one."""
        toks = self.tokenize(text, parse_special=True)
        if len(toks) == 1 and self.token_text(toks[0]) == text:
            return toks[0]
        return None

    @property
    def wants_bos(self) -> bool:
        """Whether the vocabulary asks for a BOS token at the start of a prompt."""
        return bool(self._lib.llama_vocab_get_add_bos(self._require_open()))

    def native_eog(self, token: int) -> bool:
        """llama.cpp's own end-of-generation test."""
        return bool(self._lib.llama_vocab_is_eog(self._require_open(), token))

    # ------------------------------------------------------------ tokenization

    def tokenize(
        self, text: str, add_special: bool = False, parse_special: bool = False
    ) -> list[int]:
        """Tokenize text; ``add_special`` adds BOS/EOS as the model wants, ``parse_special``
        turns special-token texts such as "<fim_prefix>" into their ids."""
        vocab = self._require_open()
        data = text.encode("utf-8", errors="replace")
        cap = len(data) + 16
        while True:
            out, cap = self._token_buffer(cap)
            n = self._lib.llama_tokenize(vocab, data, len(data), out, cap, add_special,
                                         parse_special)  # fmt: skip
            if n >= 0:
                return list(out[:n])
            if -n <= cap:  # pragma: no cover - defensive against an API change
                raise ModelError(f"tokenization failed ({n})")
            cap = -n

    def _token_buffer(self, cap: int) -> tuple[Any, int]:
        """A token array of at least ``cap`` entries, and its length.  Lengths are powers
        of two whose array types are kept: ctypes makes a class for every new length and
        keeps it only weakly, so one per prompt length would be cyclic garbage a call,
        kept until a full collection."""
        size = 1 << max(6, (cap - 1).bit_length())
        kind = self._buffer_types.get(size)
        if kind is None:
            kind = self._buffer_types[size] = self._lib.llama_token * size
        return kind(), size

    def tokenize_infill(self, text: str) -> list[int]:
        """Tokenize without the dummy leading space (CodeLlama's ``encode_infilling``)."""
        return tokenize_without_dummy_space(
            text, self.tokenize, self._token_bytes, self.space_prefix
        )


def tokenize_without_dummy_space(
    text: str,
    tokenize: Callable[[str], list[int]],
    token_bytes: Sequence[bytes],
    space_prefix: bool,
) -> list[int]:
    """``tokenize(text)`` without SentencePiece's dummy leading space, as CodeLlama's and
    Mistral's reference code encode an infilling suffix: tokenize ``"\n" + text`` and drop
    the line break's tokens, where that spells ``text`` exactly; else drop a lone leading
    space token.  Any tokenizer (in process, or a server's) with the vocabulary's bytes."""
    if not text or not space_prefix:
        return tokenize(text)
    want = text.encode("utf-8", errors="replace")
    toks = tokenize("\n" + text)
    acc = b""
    for k, t in enumerate(toks):
        acc += token_bytes[t]
        if acc in (b"\n", b" \n"):
            rest = toks[k + 1 :]
            if b"".join(token_bytes[r] for r in rest) == want:
                return rest
            break
        if len(acc) >= 2:
            break
    toks = tokenize(text)
    if toks and token_bytes[toks[0]] == b" ":
        return toks[1:]
    return toks
