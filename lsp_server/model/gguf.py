"""GGUF files without llama.cpp: the key/value metadata, read and written.

The model layer reads what llama.cpp does not tell: the token types as the file stores
them (llama.cpp turns some ordinary tokens into control tokens when it loads a model)
and the pre-tokenizer's name, which says which family a vocabulary belongs to.
``testmodels.tiny`` edits vocabularies and writes test models with the same code.

``gguf.GGUFReader`` takes seconds on a 49k-token vocabulary (one numpy view per item);
this walk over a memory map takes milliseconds, decodes only the entries asked for, and
keeps every entry as the file encodes it, so an entry nobody edits is copied as is.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import ModelError

__all__ = [
    "ARRAY",
    "BOOL",
    "FLOAT32",
    "STRING",
    "UINT32",
    "Entry",
    "encode_entry",
    "encode_string",
    "read_entries",
    "read_metadata",
    "write_gguf",
]

#: GGUF value types (``gguf_type``) used by name.
UINT32, FLOAT32, BOOL, STRING, ARRAY = 4, 6, 7, 8, 9
SCALAR_FORMATS: dict[int, str] = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
    12: "<d",
}  # fmt: skip
ARRAY_DTYPES: dict[int, str] = {
    0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8",
    11: "<i8", 12: "<f8",
}  # fmt: skip
_ALIGNMENT = 32
_GGML_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1}
_unpack_q = struct.Struct("<Q").unpack_from


@dataclass
class Entry:
    """One metadata entry: its key, types, and its value as encoded in the file (from the
    type field on)."""

    key: str
    vtype: int
    sub: int | None  # the item type of an array
    raw: bytes
    payload: int  # offset in ``raw`` where the value (array items) starts

    def value(self) -> Any:
        """The decoded value; numeric arrays as numpy arrays, string arrays as lists."""
        if self.vtype == ARRAY:
            (count,) = _unpack_q(self.raw, 8)
            if self.sub == STRING:
                return _decode_strings(self.raw, self.payload, count)
            if self.sub not in ARRAY_DTYPES:
                raise ModelError(f"{self.key}: unsupported GGUF array type {self.sub}")
            return np.frombuffer(self.raw, ARRAY_DTYPES[self.sub], count, self.payload)
        if self.vtype == STRING:
            return _decode_strings(self.raw, self.payload, 1)[0]
        (value,) = struct.unpack_from(SCALAR_FORMATS[self.vtype], self.raw, self.payload)
        return value

    @property
    def count(self) -> int:
        """The number of items of an array (1 for a scalar)."""
        return int(_unpack_q(self.raw, 8)[0]) if self.vtype == ARRAY else 1


def _decode_strings(data: bytes, pos: int, count: int) -> list[str]:
    out: list[str] = []
    for _ in range(count):
        (length,) = _unpack_q(data, pos)
        pos += 8
        out.append(data[pos : pos + length].decode("utf-8", errors="surrogateescape"))
        pos += length
    return out


def read_entries(path: Path, keys: Collection[str] | None = None) -> list[Entry]:
    """The key/value entries of a GGUF file (memory-mapped: models may be large).

    With ``keys``, only those entries, and the walk stops once all of them are read.
    """
    wanted = None if keys is None else set(keys)
    with path.open("rb") as f:
        try:
            data: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as exc:  # an empty file
            raise ModelError(f"{path} is not a GGUF file") from exc
    with data:
        if data[:4] != b"GGUF":
            raise ModelError(f"{path} is not a GGUF file")
        version, _n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
        if version < 2:
            raise ModelError(f"{path}: GGUF version {version} is too old")
        pos = 24
        out: list[Entry] = []
        for _ in range(n_kv):
            if wanted is not None and not wanted:
                break
            (length,) = _unpack_q(data, pos)
            key = data[pos + 8 : pos + 8 + length].decode("utf-8")
            start = pos = pos + 8 + length
            (vtype,) = struct.unpack_from("<I", data, pos)
            pos += 4
            sub: int | None = None
            if vtype == ARRAY:
                sub, count = struct.unpack_from("<IQ", data, pos)
                pos += 12
                if sub == STRING:
                    for _ in range(count):
                        pos += 8 + _unpack_q(data, pos)[0]
                elif sub in ARRAY_DTYPES:
                    pos += count * np.dtype(ARRAY_DTYPES[sub]).itemsize
                else:
                    raise ModelError(f"{path}: unsupported GGUF array type {sub} for {key}")
            elif vtype == STRING:
                pos += 8 + _unpack_q(data, pos)[0]
            elif vtype in SCALAR_FORMATS:
                pos += struct.calcsize(SCALAR_FORMATS[vtype])
            else:
                raise ModelError(f"{path}: unsupported GGUF value type {vtype} for {key}")
            if wanted is None or key in wanted:
                payload = 16 if vtype == ARRAY else 4
                out.append(Entry(key, vtype, sub, bytes(data[start:pos]), payload))
                if wanted is not None:
                    wanted.discard(key)
    return out


def read_metadata(path: Path) -> dict[str, tuple[int, int | None, Any]]:
    """A GGUF file's key/value metadata as ``{key: (type, array_item_type, value)}``;
    numeric arrays come back as lists."""
    out: dict[str, tuple[int, int | None, Any]] = {}
    for entry in read_entries(path):
        value = entry.value()
        if isinstance(value, np.ndarray):
            value = value.tolist()
        out[entry.key] = (entry.vtype, entry.sub, value)
    return out


def encode_string(text: str | bytes) -> bytes:
    data = text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def encode_entry(key: str, vtype: int, value: Any, sub: int | None = None) -> bytes:
    """A key/value entry as GGUF stores it."""
    head = encode_string(key) + struct.pack("<I", vtype)
    if vtype == STRING:
        return head + encode_string(value)
    if vtype != ARRAY:
        return head + struct.pack(SCALAR_FORMATS[vtype], value)
    assert sub is not None
    head += struct.pack("<IQ", sub, len(value))
    if sub == STRING:
        return head + b"".join(encode_string(item) for item in value)
    return head + np.asarray(value, dtype=ARRAY_DTYPES[sub]).tobytes()


def write_gguf(
    path: Path, entries: Sequence[bytes], tensors: Sequence[tuple[str, npt.NDArray[Any]]]
) -> None:
    """Write a GGUF v3 file: encoded key/value entries, then the tensors, 32-byte aligned."""
    infos: list[bytes] = []
    offset = 0
    for name, array in tensors:
        dims = array.shape[::-1]  # ggml's ne: innermost first
        infos.append(
            encode_string(name)
            + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, _GGML_TYPES[array.dtype], offset)
        )
        offset += -(-array.nbytes // _ALIGNMENT) * _ALIGNMENT
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(entries)))
        for entry in (*entries, *infos):
            out.write(entry)
        out.write(b"\0" * (-out.tell() % _ALIGNMENT))
        for _name, array in tensors:
            out.write(np.ascontiguousarray(array).tobytes())
            out.write(b"\0" * (-array.nbytes % _ALIGNMENT))
    os.replace(tmp, path)
