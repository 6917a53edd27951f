"""Which tokens can come next while token healing owes text or a character is unfinished.

The decoder looks beyond its top k candidates in two situations: token healing took the
last word-piece out of the prompt, so the first tokens must write it again (any token that
starts with the owed bytes, or that is a piece of them), and a token ended inside a UTF-8
character, so the next token must finish it. Scanning the vocabulary for those tokens at
every such step costs time in proportion to its size: five times more for Gemma's 262,144
tokens than for StarCoder's 49,152. ``TokenIndex`` answers the same questions from the
token byte strings sorted once (``bisect`` on the sorted list, in C), in time that depends
on the length of the query and the number of matches, not on the vocabulary.

Built once per vocabulary; ``TokenIndex.cached`` keeps the sort order on disk, keyed by a
hash of the token bytes, so a model loads its index instead of sorting again.
"""

from __future__ import annotations

import hashlib
import os
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .cache import cache_dir

__all__ = ["TokenIndex"]

IntArray = npt.NDArray[np.int32]

#: Bumped when the cached arrays change meaning.
_FORMAT = 2

# What may follow the bytes already held of an unfinished character, as Python's UTF-8
# decoder checks it (no overlong forms, no surrogates, nothing above U+10FFFF): the range
# of the next byte, by lead byte, while only the lead is held.
_SECOND_BYTE = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}
_ANY_CONTINUATION = (0x80, 0xBF)


def _needed(lead: int) -> int:
    """How many continuation bytes a lead byte asks for (0: not a valid lead)."""
    if 0xC2 <= lead <= 0xDF:
        return 1
    if 0xE0 <= lead <= 0xEF:
        return 2
    if 0xF0 <= lead <= 0xF4:
        return 3
    return 0


def _is_utf8_prefix(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8, or valid UTF-8 cut inside its last character."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.reason == "unexpected end of data" and exc.end == len(data)
    return True


def _successor(prefix: bytes) -> bytes | None:
    """The least byte string greater than every string starting with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _frozen(array: IntArray) -> IntArray:
    array.setflags(write=False)
    return array


def _vocab_key(vocab: Sequence[bytes]) -> str:
    lengths = np.fromiter(map(len, vocab), dtype=np.int64, count=len(vocab))
    digest = hashlib.sha256(b"fimlsp-token-index-%d\0" % _FORMAT)
    digest.update(lengths.tobytes())
    digest.update(b"".join(vocab))
    return digest.hexdigest()


def _prefix_links(sorted_bytes: Sequence[bytes]) -> tuple[IntArray, IntArray]:
    """For each position in byte order: the position of the longest token that is a proper
    prefix of this one (the last of its equal run; -1: none), and the first position of
    this token's run of equal byte strings."""
    n = len(sorted_bytes)
    link = np.full(n, -1, dtype=np.int32)
    first = np.arange(n, dtype=np.int32)
    stack: list[int] = []  # positions whose bytes are prefixes of the current token's
    previous: bytes | None = None
    for pos, data in enumerate(sorted_bytes):
        if data == previous:
            first[pos] = first[pos - 1]
            link[pos] = link[pos - 1]
            stack[-1] = pos
            continue
        while stack and not data.startswith(sorted_bytes[stack[-1]]):
            stack.pop()
        link[pos] = stack[-1] if stack else -1
        stack.append(pos)
        previous = data
    return link, first


class TokenIndex:
    """Token ids by their bytes, for the decoder's look beyond the top k.

    ``starting_with(b)``: tokens whose bytes start with ``b`` (they write owed text and
    may go on); ``prefixes_of(b)``: non-empty tokens whose bytes are a prefix of ``b``
    (they write part of it); ``owing(b)``: both, each once; ``continuing(held)``: non-empty
    tokens after which ``held + token`` is still UTF-8 (possibly cut inside its last
    character), ``held`` being the start of an unfinished character; ``empty``: tokens
    without bytes (control tokens: llama.cpp gives every token it ends generation at the
    control attribute, so only these, and an end-of-sequence id set in the metadata, need
    ``llama_vocab_is_eog``).
    Every answer is a read-only int32 array of ids; do not modify it.

    The tokens are kept sorted by their bytes: those starting with given bytes are a
    contiguous run, found by two ``bisect`` calls. Each sorted token also links to the
    longest token that is a proper prefix of it, so the tokens that are prefixes of given
    bytes are one ``bisect`` (the greatest token not after them, whose prefixes they
    all are) and a walk down its links.
    """

    def __init__(self, vocab: Sequence[bytes], tables: IntArray | None = None) -> None:
        self.n_vocab = len(vocab)
        if tables is None:
            order = np.array(sorted(range(self.n_vocab), key=vocab.__getitem__), np.int32)
            self._sorted: list[bytes] = list(map(vocab.__getitem__, order.tolist()))
            link, first = _prefix_links(self._sorted)
            tables = np.stack((order, link, first))
        else:
            self._sorted = list(map(vocab.__getitem__, tables[0].tolist()))
        tables.setflags(write=False)
        self._tables = tables
        self._ids: IntArray = tables[0]
        self._link, self._first = tables[1], tables[2]
        self._continuations = self._continuation_table()

    # ------------------------------------------------------------ construction

    @classmethod
    def cached(
        cls, vocab: Sequence[bytes], folder: str | os.PathLike[str] | None = None
    ) -> TokenIndex:
        """The index of ``vocab``, its tables read from (or written to) the cache."""
        path = Path(folder) if folder is not None else cache_dir("token-index")
        target = path / f"{_vocab_key(vocab)}.npy"
        try:
            tables = np.load(target, allow_pickle=False)
        except (OSError, ValueError):
            tables = None
        if tables is not None and tables.shape == (3, len(vocab)) and tables.dtype == np.int32:
            return cls(vocab, tables)
        index = cls(vocab)
        tmp = target.with_name(f"{target.stem}.{os.getpid()}.tmp.npy")
        try:
            path.mkdir(parents=True, exist_ok=True)
            np.save(tmp, index._tables, allow_pickle=False)
            os.replace(tmp, target)
        except OSError:  # a read-only cache only costs the next load a sort
            tmp.unlink(missing_ok=True)
        return index

    def _range(self, prefix: bytes) -> tuple[int, int]:
        """Positions in byte order of the tokens that start with ``prefix``."""
        lo = bisect_left(self._sorted, prefix)
        upper = _successor(prefix)
        hi = self.n_vocab if upper is None else bisect_left(self._sorted, upper, lo)
        return lo, hi

    def _continuation_table(self) -> dict[tuple[int, int, int], IntArray]:
        """For each (bytes still needed, lowest and highest next byte), the tokens that
        can follow: a run of continuation bytes no longer than needed, or exactly the
        needed ones followed by valid UTF-8."""
        lo, hi = self._range_between(b"\x80", b"\xc0")  # tokens led by a continuation byte
        # (id, first byte, length of the leading run, whether the run is the whole token,
        #  whether what follows the run is UTF-8)
        runs: list[tuple[int, int, int, bool, bool]] = []
        for pos in range(lo, hi):
            data = self._sorted[pos]
            run = 1
            while run < len(data) and 0x80 <= data[run] <= 0xBF:
                run += 1
            tail_ok = _is_utf8_prefix(data[run:])
            runs.append((int(self._ids[pos]), data[0], run, run == len(data), tail_ok))
        classes = {(need, *_ANY_CONTINUATION) for need in (1, 2, 3)}
        classes |= {(_needed(lead), *span) for lead, span in _SECOND_BYTE.items()}
        table: dict[tuple[int, int, int], IntArray] = {}
        for need, first_lo, first_hi in sorted(classes):
            ids = [
                token
                for token, first, run, whole, tail_ok in runs
                if first_lo <= first <= first_hi
                and ((whole and run <= need) or (run == need and tail_ok))
            ]
            table[(need, first_lo, first_hi)] = _frozen(np.array(ids, dtype=np.int32))
        return table

    def _range_between(self, low: bytes, high: bytes) -> tuple[int, int]:
        return bisect_left(self._sorted, low), bisect_left(self._sorted, high)

    # ------------------------------------------------------------ queries

    def starting_with(self, prefix: bytes) -> IntArray:
        """Tokens whose bytes start with ``prefix`` (all of them for b"")."""
        lo, hi = self._range(prefix)
        return self._ids[lo:hi]

    def prefixes_of(self, data: bytes, *, proper: bool = False) -> IntArray:
        """Non-empty tokens whose bytes are a prefix of ``data`` (shorter than it if
        ``proper``), longest first."""
        pos = bisect_right(self._sorted, data) - 1  # every prefix token is a prefix of it
        link, sorted_bytes = self._link, self._sorted
        if proper and pos >= 0 and sorted_bytes[pos] == data:
            pos = int(link[pos])
        while pos >= 0 and not data.startswith(sorted_bytes[pos]):
            pos = int(link[pos])
        runs: list[IntArray] = []
        while pos >= 0 and sorted_bytes[pos]:
            runs.append(self._ids[int(self._first[pos]) : pos + 1])
            pos = int(link[pos])
        if not runs:
            return self._ids[:0]
        return runs[0] if len(runs) == 1 else _frozen(np.concatenate(runs))

    def owing(self, owed: bytes) -> IntArray:
        """Tokens compatible with owed bytes: they start with them, or are a non-empty
        proper prefix of them (token healing's candidates, each once)."""
        longer = self.starting_with(owed)
        shorter = self.prefixes_of(owed, proper=True)
        if not len(shorter):
            return longer
        return _frozen(np.concatenate((shorter, longer)))

    def continuing(self, held: bytes) -> IntArray:
        """Non-empty tokens after which ``held + token`` is still (a prefix of) UTF-8;
        ``held`` is the start of an unfinished character, as the decoder holds it back."""
        need = _needed(held[0]) - (len(held) - 1) if held else 0
        if need <= 0 or not _is_utf8_prefix(held):
            raise ValueError(f"{held!r} is not the start of an unfinished UTF-8 character")
        if len(held) == 1:
            first_lo, first_hi = _SECOND_BYTE.get(held[0], _ANY_CONTINUATION)
        else:
            first_lo, first_hi = _ANY_CONTINUATION
        return self._continuations[(need, first_lo, first_hi)]

    @property
    def empty(self) -> IntArray:
        """Tokens without bytes (they sort first)."""
        lo, hi = self._range_between(b"", b"\x00")
        return self._ids[lo:hi]
