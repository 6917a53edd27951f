"""Random-weight GGUF models with the real shapes and tokenizer of Qwen2.5-Coder.

Usage::

    python -m bench.gpu.models --shape 0.5b|1.5b|7b|tiny --out FILE.gguf
        [--type q8_0|f16] [--tokenizer .gpu_payload/qwen2.5-coder-tokenizer.gguf.xz]

Real weights do not fit in what a GPU machine receives (64 MiB), and a decoding step's
time depends on the shapes (layers, widths, heads, vocabulary) and the weights' type,
not on their values.  So the models are built there: the ``qwen2`` architecture with the
hyper-parameters of Qwen2.5-Coder's published configurations (tied embeddings for 0.5B
and 1.5B, untied for 7B; the 151,936-row embedding, padding included) and the real
tokenizer (``bench.gpu.pack`` extracts it), so the prompts, the FIM tokens and fimlsp's
family detection are those of the real model.

The weights are small random values (the logits stay finite) drawn once per tensor kind
as a block of a few MiB and tiled over each tensor, written in large chunks: the 7B
shape in Q8_0 (8 GB) takes seconds plus the disk's write time.  ``tiny`` is the real
vocabulary over two layers 64 wide, for tests and the CPU smoke run.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np

from bench.gpu.pack import PAYLOAD, TOKENIZER_FILE, read_tokenizer_entries
from lsp_server.model import gguf

__all__ = ["SHAPES", "Shape", "WeightType", "build_model", "model_bytes"]

WeightType = Literal["f16", "q8_0"]


@dataclass(frozen=True)
class Shape:
    """A model's hyper-parameters, as ``config.json`` gives them."""

    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    tied: bool  # the output matrix is the token embedding's
    n_ctx_train: int = 32768
    rope_theta: float = 1_000_000.0
    rms_eps: float = 1e-6
    n_vocab: int = 151936


#: Qwen2.5-Coder's published configurations (Qwen/Qwen2.5-Coder-*B on Hugging Face).
SHAPES: dict[str, Shape] = {
    "tiny": Shape(n_layer=2, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, tied=True),
    "0.5b": Shape(n_layer=24, n_embd=896, n_ff=4864, n_head=14, n_head_kv=2, tied=True),
    "1.5b": Shape(n_layer=28, n_embd=1536, n_ff=8960, n_head=12, n_head_kv=2, tied=True),
    "7b": Shape(n_layer=28, n_embd=3584, n_ff=18944, n_head=28, n_head_kv=4, tied=False),
}

_F32, _F16, _Q8_0 = 0, 1, 8
_GGML_TYPE = {"f16": _F16, "q8_0": _Q8_0}
_FILE_TYPE = {"f16": 1, "q8_0": 7}  # llama_ftype: MOSTLY_F16, MOSTLY_Q8_0
_Q8_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", 32)])  # 32 weights in 34 bytes
_ALIGN = 32
#: Bytes of random weights drawn per tensor kind, then tiled.
_POOL_BYTES = 4 << 20
#: Bytes written per call.
_CHUNK_BYTES = 64 << 20


@dataclass(frozen=True)
class _Tensor:
    """A tensor to write: ggml dimensions (innermost first), type and the weights' scale
    (0: a norm, all ones; None: a bias, all zeros)."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    scale: float | None

    @property
    def nbytes(self) -> int:
        n = int(np.prod(self.dims))
        if self.ggml_type == _F32:
            return 4 * n
        if self.ggml_type == _F16:
            return 2 * n
        return n // 32 * _Q8_BLOCK.itemsize


def _tensors(shape: Shape, wtype: WeightType) -> list[_Tensor]:
    """The tensors of llama.cpp's ``qwen2`` architecture, in the order conversions write."""
    t = _GGML_TYPE[wtype]
    d, ff, v = shape.n_embd, shape.n_ff, shape.n_vocab
    head = d // shape.n_head
    kv = head * shape.n_head_kv
    out = [_Tensor("token_embd.weight", (d, v), t, 0.5)]
    if not shape.tied:
        out.append(_Tensor("output.weight", (d, v), t, d**-0.5))
    out.append(_Tensor("output_norm.weight", (d,), _F32, 0.0))
    for i in range(shape.n_layer):
        b = f"blk.{i}"
        out += [
            _Tensor(f"{b}.attn_norm.weight", (d,), _F32, 0.0),
            _Tensor(f"{b}.attn_q.weight", (d, d), t, d**-0.5),
            _Tensor(f"{b}.attn_q.bias", (d,), _F32, None),
            _Tensor(f"{b}.attn_k.weight", (d, kv), t, d**-0.5),
            _Tensor(f"{b}.attn_k.bias", (kv,), _F32, None),
            _Tensor(f"{b}.attn_v.weight", (d, kv), t, d**-0.5),
            _Tensor(f"{b}.attn_v.bias", (kv,), _F32, None),
            _Tensor(f"{b}.attn_output.weight", (d, d), t, d**-0.5),
            _Tensor(f"{b}.ffn_norm.weight", (d,), _F32, 0.0),
            _Tensor(f"{b}.ffn_gate.weight", (d, ff), t, d**-0.5),
            _Tensor(f"{b}.ffn_up.weight", (d, ff), t, d**-0.5),
            _Tensor(f"{b}.ffn_down.weight", (ff, d), t, ff**-0.5),
        ]
    return out


def model_bytes(shape: Shape, wtype: WeightType) -> int:
    """The tensor data's size (the file is this plus the tokenizer and headers)."""
    return sum(-(-t.nbytes // _ALIGN) * _ALIGN for t in _tensors(shape, wtype))


def _pool(tensor: _Tensor, rng: np.random.Generator) -> bytes:
    """Random weights of the tensor's type and scale, ``_POOL_BYTES`` or its whole size
    if smaller, to be tiled over it."""
    size = min(tensor.nbytes, _POOL_BYTES)
    if tensor.ggml_type == _F32:
        value = 0.0 if tensor.scale is None else 1.0
        return np.full(size // 4, value, dtype=np.float32).tobytes()
    scale = float(tensor.scale or 0.0)
    if tensor.ggml_type == _F16:
        values = rng.standard_normal(size // 2, dtype=np.float32) * scale
        return values.astype(np.float16).tobytes()
    blocks = np.zeros(size // _Q8_BLOCK.itemsize, dtype=_Q8_BLOCK)
    blocks["qs"] = rng.integers(-127, 128, size=blocks["qs"].shape, dtype=np.int8)
    blocks["d"] = scale / 73.3  # the standard deviation of uniform integers in [-127, 127]
    return blocks.tobytes()


def _chunks(pool: bytes, total: int) -> Iterator[memoryview]:
    """``total`` bytes of ``pool`` repeated, in pieces of at most ``_CHUNK_BYTES``."""
    reps = max(1, _CHUNK_BYTES // len(pool))
    big = memoryview(pool * reps)
    left = total
    while left > 0:
        piece = big[: min(left, len(big))]
        yield piece
        left -= len(piece)


def _header(
    shape: Shape,
    wtype: WeightType,
    name: str,
    tokenizer: Sequence[gguf.Entry],
    tensors: Sequence[_Tensor],
) -> bytes:
    arch = "qwen2"
    u32, f32 = gguf.UINT32, gguf.FLOAT32
    kvs = [
        gguf.encode_entry("general.architecture", gguf.STRING, arch),
        gguf.encode_entry("general.name", gguf.STRING, name),
        gguf.encode_entry("general.file_type", u32, _FILE_TYPE[wtype]),
        gguf.encode_entry("general.quantization_version", u32, 2),
        gguf.encode_entry(f"{arch}.block_count", u32, shape.n_layer),
        gguf.encode_entry(f"{arch}.context_length", u32, shape.n_ctx_train),
        gguf.encode_entry(f"{arch}.embedding_length", u32, shape.n_embd),
        gguf.encode_entry(f"{arch}.feed_forward_length", u32, shape.n_ff),
        gguf.encode_entry(f"{arch}.attention.head_count", u32, shape.n_head),
        gguf.encode_entry(f"{arch}.attention.head_count_kv", u32, shape.n_head_kv),
        gguf.encode_entry(f"{arch}.rope.freq_base", f32, shape.rope_theta),
        gguf.encode_entry(f"{arch}.attention.layer_norm_rms_epsilon", f32, shape.rms_eps),
        *(gguf.encode_string(e.key) + e.raw for e in tokenizer),
    ]
    infos = []
    offset = 0
    for t in tensors:
        infos.append(
            gguf.encode_string(t.name)
            + struct.pack(f"<I{len(t.dims)}QIQ", len(t.dims), *t.dims, t.ggml_type, offset)
        )
        offset += -(-t.nbytes // _ALIGN) * _ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs + infos)
    return head + b"\0" * (-len(head) % _ALIGN)


def _write_tensor(out: BinaryIO, tensor: _Tensor, rng: np.random.Generator) -> None:
    for piece in _chunks(_pool(tensor, rng), tensor.nbytes):
        out.write(piece)
    out.write(b"\0" * (-tensor.nbytes % _ALIGN))


def build_model(
    shape_name: str,
    out: Path,
    wtype: WeightType = "q8_0",
    tokenizer: Path = PAYLOAD / TOKENIZER_FILE,
    seed: int = 0,
) -> Path:
    """Write the random-weight model of ``shape_name`` to ``out`` and return it."""
    shape = SHAPES[shape_name]
    entries = read_tokenizer_entries(tokenizer)
    n_tokens = next(e.count for e in entries if e.key == "tokenizer.ggml.tokens")
    if n_tokens != shape.n_vocab:
        raise ValueError(f"{tokenizer}: {n_tokens} tokens, the shape has {shape.n_vocab}")
    tensors = _tensors(shape, wtype)
    rng = np.random.default_rng(seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    name = f"fimlsp-random-qwen2.5-coder-{shape_name}-{wtype}"
    with tmp.open("wb") as f:
        f.write(_header(shape, wtype, name, entries, tensors))
        for tensor in tensors:
            _write_tensor(f, tensor, rng)
    tmp.replace(out)
    return out


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.gpu.models",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--shape", choices=sorted(SHAPES), required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--type", dest="wtype", choices=sorted(_GGML_TYPE), default="q8_0")
    p.add_argument("--tokenizer", type=Path, default=PAYLOAD / TOKENIZER_FILE)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    t0 = time.monotonic()
    path = build_model(args.shape, args.out, args.wtype, args.tokenizer, args.seed)
    size = path.stat().st_size
    print(
        f"{path}: {args.shape} {args.wtype}, {size / 2**30:.2f} GiB in "
        f"{time.monotonic() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
