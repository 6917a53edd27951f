"""The model's vocabulary as a remote backend sees it: FIM markers, end tokens, id lookup.

The FIM markers, the prompt layout and the end tokens are found by
:mod:`lsp_server.model.families`, exactly as for the in-process model; what differs is where
the two questions it asks are answered:

* from a local copy of the vocabulary (any GGUF, loaded without weights: the
  ``modelVocab`` setting), by llama.cpp itself: :class:`LocalVocabulary`, which also
  tokenizes in process and maps the token texts of OpenAI-style answers back to ids;
* from the server's answers (llama-server's ``/tokenize`` with ``with_pieces`` renders any
  list of ids, special tokens as their text): llama.cpp reports a kind's token from the
  GGUF's metadata or, failing that, by its text, so the texts llama.cpp looks for
  (:data:`LLAMA_CPP_TEXTS`, from ``llama_vocab::impl::load``) stand in for what it would
  report.

Generated text never contains control tokens (llama.cpp renders them as nothing), so a
vocabulary also knows which ids are control tokens: exactly, from a local copy; from the
server, the markers and end tokens it found, and every other one as soon as the server
names it among the alternatives of a generated token (with its bytes, rendered as text).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import ModelError
from ...families import FIM_KINDS, FimLayout, FimTokens, choose_layout, find_fim_tokens, stop_tokens
from ...native import library
from ...vocabulary import LlamaVocabulary

__all__ = [
    "EOG_TEXTS",
    "LLAMA_CPP_TEXTS",
    "LocalVocabulary",
    "ServerVocab",
    "load_local_vocab",
]

#: Token texts by which llama.cpp finds each kind of special token when the GGUF does not
#: name it, in llama.cpp's order (``llama_vocab::impl::load``).  The families' own extra
#: texts (Codestral's ``[PREFIX]``, StarCoder2's ``<file_sep>``, ...) are
#: :func:`~lsp_server.model.families.find_fim_tokens`' business, not listed here.
LLAMA_CPP_TEXTS: Mapping[str, tuple[str, ...]] = {
    "pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
            "▁<PRE>", "<|code_prefix|>", "<|prefix|>"),
    "suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
            "▁<SUF>", "<|code_suffix|>", "<|suffix|>"),
    "mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
            "▁<MID>", "<|code_middle|>", "<|middle|>"),
    "pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "sep": ("<|file_sep|>",),
    "eot": ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
            "<end_of_utterance>"),
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
    the decoder needs from it, found the way the in-process backend finds it.

    ``control``: ids that generated text renders as nothing (known so far, see the module
    docstring); ``text_bytes()`` is the table the decoder reads.
    """

    pieces: tuple[bytes, ...]
    fim: FimTokens
    layout: FimLayout
    eog: frozenset[int]
    control: frozenset[int]
    add_bos: bool
    space_prefix: bool
    _ids: Mapping[str, int] = field(repr=False, compare=False, default_factory=dict)
    _ambiguous: frozenset[str] = field(repr=False, compare=False, default=frozenset())

    @property
    def n_vocab(self) -> int:
        return len(self.pieces)

    @classmethod
    def detect(
        cls,
        pieces: Sequence[bytes],
        *,
        reported: Callable[[str], int | None] | None,
        native_eog: Callable[[int], bool] | None = None,
        control: frozenset[int] | None = None,
        wants_bos: bool,
        space_prefix: bool,
        eos: int | None = None,
        bos: int | None = None,
    ) -> ServerVocab:
        """Find FIM markers, the layout and end tokens from every token's text.

        ``reported(kind)`` is what llama.cpp reports for a kind (a local copy), or None to
        stand in for it by :data:`LLAMA_CPP_TEXTS` with ``eos`` and ``bos`` given;
        ``native_eog`` is llama.cpp's own end-of-generation test (else
        :data:`EOG_TEXTS`); ``control`` the control tokens where known (else the markers,
        end tokens and BOS found here).
        """
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
        if reported is None:
            reported = _reported_by_text(ids, eos, bos)
        fim = find_fim_tokens(reported, ids.get)
        add_bos = wants_bos and fim.bos is not None
        layout = choose_layout(fim, lambda t: pieces[t].decode("utf-8", "replace"), add_bos)
        stops = stop_tokens(fim)
        if native_eog is None:
            eog = {ids[t] for t in EOG_TEXTS if t in ids} | stops
        else:
            eog = {t for t in range(len(pieces)) if native_eog(t)} | stops
        if control is None:
            control = frozenset(t for t in (*stops, fim.bos, *eog) if t is not None)
        return cls(
            tuple(pieces),
            fim,
            layout,
            frozenset(eog),
            control,
            add_bos,
            space_prefix,
            ids,
            frozenset(ambiguous),
        )

    def special_id(self, text: str) -> int | None:
        """Id of the token whose text is exactly ``text``."""
        return self._ids.get(text)

    def token_bytes(self, token: int) -> bytes:
        """The token's bytes, a special token as its text."""
        return self.pieces[token]

    def text_bytes(self) -> list[bytes]:
        """Every token's bytes as generated text renders them (control tokens as b"")."""
        control = self.control
        return [b"" if t in control else p for t, p in enumerate(self.pieces)]

    def resolve(self, text: str) -> int | None:
        """Id of the token an OpenAI-style answer spells ``text``; None when no token or
        several tokens have that text (then the answer cannot say which one was meant).
        Servers spell bytes that are not whole characters as U+FFFD or nothing, so texts
        with U+FFFD and the empty text name no token."""
        if not text or "\ufffd" in text or text in self._ambiguous:
            return None
        return self._ids.get(text)


def _reported_by_text(
    ids: Mapping[str, int], eos: int | None, bos: int | None
) -> Callable[[str], int | None]:
    """What llama.cpp would report for each kind, found by text as llama.cpp does."""

    def reported(kind: str) -> int | None:
        if kind == "eos":
            return eos
        if kind == "bos":
            return bos
        assert kind in (*FIM_KINDS, "eot"), kind
        return next((ids[t] for t in LLAMA_CPP_TEXTS[kind] if t in ids), None)

    return reported


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
    wants_bos = (
        bool(first_of_a_special)
        and first_of_a_special[0] == bos
        and (not first_of_a or first_of_a[0] != bos)
    )
    space_prefix = b"".join(table[t] for t in first_of_a if 0 <= t < len(table)) == b" a"
    return ServerVocab.detect(
        table, reported=None, wants_bos=wants_bos, space_prefix=space_prefix, eos=eos, bos=bos
    )


class LocalVocabulary:
    """A model's vocabulary loaded from a local GGUF without weights (the ``modelVocab``
    setting: a vocabulary-only file or the whole model): llama.cpp tokenizes in process and
    reports the special tokens, so prompts, markers and end tokens are exactly those of the
    in-process model.  Close it (or use ``with``) to free the native vocabulary."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        lib = self._lib = library()
        params = lib.llama_model_default_params()
        params.vocab_only = True
        self._model: Any = lib.llama_model_load_from_file(os.fsencode(path), params)
        if not self._model:
            raise ModelError(
                f"cannot load the vocabulary of {path}: not a GGUF model or vocabulary"
            )
        try:
            #: Tokenization and the token table as generated text renders it.
            self.tokens = LlamaVocabulary(lib, self._model, str(path))
            tokens = self.tokens
            pieces = _special_pieces(lib, lib.llama_model_get_vocab(self._model), tokens.n_vocab)
            control = frozenset(t for t, p in enumerate(pieces) if p and not tokens.token_bytes[t])
            self.vocab = ServerVocab.detect(
                pieces,
                reported=tokens.reported_id,
                native_eog=tokens.native_eog,
                control=control,
                wants_bos=tokens.wants_bos,
                space_prefix=tokens.space_prefix,
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Free the native vocabulary (idempotent)."""
        if getattr(self, "tokens", None) is not None:
            self.tokens.close()
        if self._model:
            self._lib.llama_model_free(self._model)
            self._model = None

    def __enter__(self) -> LocalVocabulary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _special_pieces(lib: Any, vocab: Any, n_vocab: int) -> list[bytes]:
    """Every token's bytes with special tokens as their text (``special=True``)."""
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
    return pieces


def load_local_vocab(path: str | os.PathLike[str]) -> ServerVocab:
    """The vocabulary of a local GGUF (see :class:`LocalVocabulary`), as a table."""
    with LocalVocabulary(path) as local:
        return local.vocab
