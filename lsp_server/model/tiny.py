"""Tiny random-weight GGUF models with real code-model tokenizers, for tests.

No FIM code model can be fetched in CI, yet the model layer must be exercised end to end
through llama.cpp. A 2-layer, 64-wide llama-architecture model with random weights loads in
milliseconds and decodes deterministically; its tokenizer is copied from one of llama.cpp's
vocabulary-only GGUF files (StarCoder's ships with this package), so tokenization, FIM token
detection and special-token handling are exactly those of the real model family.

Command line::

    python -m lsp_server.model.tiny build OUT.gguf [--vocab starcoder] [--seed 0]
    python -m lsp_server.model.tiny extract-vocab llama_cpp_python-0.3.36.tar.gz
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import os
import re
import shutil
import struct
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .cache import cache_dir
from .errors import ModelError

__all__ = [
    "BUNDLED_VOCABS",
    "FIM_TOKEN_TEXTS",
    "build_tiny_model",
    "extract_vocabs",
    "read_gguf_metadata",
    "tiny_model_cached",
    "vocab_path",
]

VOCAB_DIR = Path(__file__).with_name("vocab")

#: Vocabularies shipped (xz-compressed) in ``vocab/``: name -> sha256 of the plain GGUF.
BUNDLED_VOCABS: dict[str, str] = {
    "starcoder": "fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d",
}

#: Token texts llama.cpp (and ``llm.FimModel``) recognise as FIM markers. ``strip_fim``
#: renames these so that a vocabulary with FIM tokens can stand in for one without.
FIM_TOKEN_TEXTS: frozenset[str] = frozenset(
    {
        "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>",
        "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|fim_repo|>",
        "<fim-prefix>", "<fim-suffix>", "<fim-middle>", "<fim-pad>", "<fim-repo>",
        "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>",
        "<PRE>", "<SUF>", "<MID>", "<PAD>", "▁<PRE>", "▁<SUF>", "▁<MID>",
        "<|code_prefix|>", "<|code_suffix|>", "<|code_middle|>",
        "<|prefix|>", "<|suffix|>", "<|middle|>",
        "[PREFIX]", "[SUFFIX]", "[MIDDLE]",
        "<|repo_name|>", "<repo_name>", "<reponame>", "<REPO>", "<|file_sep|>", "<file_sep>",
    }
)  # fmt: skip

_FIM_ID_KEYS = ("pre", "suf", "mid", "pad", "rep", "sep")
_VOCAB_FILE = "ggml-vocab-{name}.gguf"
_SDIST_VOCAB_RE = re.compile(r"(?:^|/)vendor/llama\.cpp/models/ggml-vocab-([\w.-]+)\.gguf$")


# ---------------------------------------------------------------- vocabularies


def _search_dirs() -> list[Path]:
    """Folders holding plain ``ggml-vocab-*.gguf`` files, most specific first."""
    dirs: list[Path] = []
    env = os.environ.get("FIMLSP_VOCAB_DIR")
    if env:
        dirs.append(Path(env).expanduser())
    dirs.append(cache_dir("vocab"))
    return dirs


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _atomic_write_from(src: Any, target: Path) -> None:
    """Copy a readable stream to ``target`` via a temporary file, so that a crash or a
    concurrent test worker never leaves a half-written vocabulary behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def vocab_path(vocab: str | os.PathLike[str]) -> Path:
    """Return a plain vocabulary GGUF for a name ("starcoder") or a path.

    Names are looked up in ``$FIMLSP_VOCAB_DIR`` and the cache, then in the bundled
    ``vocab/*.gguf.xz`` (decompressed into the cache once). A path may be plain or ``.xz``.
    """
    as_path = Path(vocab)
    if isinstance(vocab, os.PathLike) or as_path.suffix in {".gguf", ".xz"} or "/" in str(vocab):
        if not as_path.is_file():
            raise ModelError(f"vocabulary file not found: {as_path}")
        if as_path.suffix != ".xz":
            return as_path
        target = cache_dir("vocab") / as_path.with_suffix("").name
        if not target.is_file():
            with lzma.open(as_path, "rb") as src:
                _atomic_write_from(src, target)
        return target

    name = str(vocab)
    filename = _VOCAB_FILE.format(name=name)
    expected = BUNDLED_VOCABS.get(name)
    for folder in _search_dirs():
        candidate = folder / filename
        if candidate.is_file() and (expected is None or _sha256(candidate) == expected):
            return candidate
    bundled = VOCAB_DIR / (filename + ".xz")
    if bundled.is_file():
        target = cache_dir("vocab") / filename
        with lzma.open(bundled, "rb") as src:
            _atomic_write_from(src, target)
        if expected is not None and _sha256(target) != expected:
            target.unlink(missing_ok=True)
            raise ModelError(f"bundled vocabulary {bundled} is corrupt (sha256 mismatch)")
        return target
    known = sorted(BUNDLED_VOCABS)
    raise ModelError(
        f"vocabulary {name!r} not found (bundled: {', '.join(known)}); extract it from the "
        "llama-cpp-python source distribution: `pip download --no-deps --no-binary :all: "
        "llama-cpp-python==0.3.36` then `python -m lsp_server.model.tiny extract-vocab "
        "llama_cpp_python-0.3.36.tar.gz`, or set FIMLSP_VOCAB_DIR to a folder of "
        "ggml-vocab-*.gguf files"
    )


def extract_vocabs(
    sdist: str | os.PathLike[str],
    dest: str | os.PathLike[str] | None = None,
    names: Iterable[str] | None = None,
) -> list[Path]:
    """Copy ``vendor/llama.cpp/models/ggml-vocab-*.gguf`` out of a llama-cpp-python sdist.

    They are too large to bundle all of them (up to 16 MB each); extracting them into the
    cache lets tests and ``build_tiny_model`` use any of them by name.
    """
    wanted = set(names) if names is not None else None
    out_dir = Path(dest) if dest is not None else cache_dir("vocab")
    written: list[Path] = []
    try:
        with tarfile.open(sdist, "r:*") as tar:
            for member in tar:
                match = _SDIST_VOCAB_RE.search(member.name)
                if not match or not member.isfile():
                    continue
                if wanted is not None and match.group(1) not in wanted:
                    continue
                src = tar.extractfile(member)
                if src is None:
                    continue
                with src:
                    target = out_dir / _VOCAB_FILE.format(name=match.group(1))
                    _atomic_write_from(src, target)
                written.append(target)
    except (OSError, tarfile.TarError) as exc:
        raise ModelError(f"cannot read source distribution {sdist}: {exc}") from exc
    if not written:
        raise ModelError(f"no ggml-vocab-*.gguf files found in {sdist}")
    return sorted(written)


# ---------------------------------------------------------------- model


_SCALAR_FORMATS: dict[int, str] = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
    12: "<d",
}  # fmt: skip
_ARRAY_DTYPES: dict[int, str] = {
    0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8",
    11: "<i8", 12: "<f8",
}  # fmt: skip
_STRING, _ARRAY = 8, 9
_CONTROL = 3  # llama_token_type LLAMA_TOKEN_TYPE_CONTROL


def read_gguf_metadata(path: Path) -> dict[str, tuple[int, int | None, Any]]:
    """Read a GGUF file's key/value metadata as ``{key: (type, array_item_type, value)}``.

    ``gguf.GGUFReader`` takes seconds on a 49k-token vocabulary (one numpy view per item);
    this plain ``struct`` walk takes milliseconds. Numeric arrays come back as lists.
    """
    data = path.read_bytes()
    if data[:4] != b"GGUF":
        raise ModelError(f"{path} is not a GGUF file")
    pos = 4
    version, _n_tensors, n_kv = struct.unpack_from("<IQQ", data, pos)
    if version < 2:
        raise ModelError(f"{path}: GGUF version {version} is too old")
    pos += 20

    def read_str() -> str:
        nonlocal pos
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + length
        return data[pos - length : pos].decode("utf-8", errors="surrogateescape")

    def read_scalar(vtype: int) -> Any:
        nonlocal pos
        if vtype == _STRING:
            return read_str()
        fmt = _SCALAR_FORMATS.get(vtype)
        if fmt is None:
            raise ModelError(f"{path}: unsupported GGUF value type {vtype}")
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value

    out: dict[str, tuple[int, int | None, Any]] = {}
    for _ in range(n_kv):
        key = read_str()
        (vtype,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if vtype != _ARRAY:
            out[key] = (vtype, None, read_scalar(vtype))
            continue
        sub, count = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if sub in _ARRAY_DTYPES:
            arr = np.frombuffer(data, dtype=_ARRAY_DTYPES[sub], count=count, offset=pos)
            pos += arr.nbytes
            out[key] = (vtype, sub, arr.tolist())
        else:
            out[key] = (vtype, sub, [read_scalar(sub) for _ in range(count)])
    return out


def _copy_tokenizer(
    writer: Any,
    vocab_file: Path,
    rename: Mapping[str, str],
    strip_fim: bool,
    fim_ids: Mapping[str, int] | None,
) -> int:
    """Copy every ``tokenizer.*`` key of ``vocab_file`` into ``writer``; return n_vocab."""
    import gguf

    fields = read_gguf_metadata(vocab_file)
    if "tokenizer.ggml.tokens" not in fields:
        raise ModelError(f"{vocab_file} has no tokenizer.ggml.tokens: not a vocabulary GGUF")
    tokens: list[str] = list(fields["tokenizer.ggml.tokens"][2])

    renames = dict(rename)
    if strip_fim:
        for idx, text in enumerate(tokens):
            if text in FIM_TOKEN_TEXTS and text not in renames:
                renames[text] = f"<reserved_{idx}>"
    if renames:
        index = {text: i for i, text in enumerate(tokens)}
        types_field = fields.get("tokenizer.ggml.token_type")
        types: list[int] | None = list(types_field[2]) if types_field else None
        for old, new in renames.items():
            if old not in index:
                raise ValueError(f"rename_tokens: {old!r} is not in the vocabulary")
            tokens[index[old]] = new
            if types is not None:
                types[index[old]] = _CONTROL  # renamed tokens play special tokens
        if len(set(tokens)) != len(tokens):
            raise ValueError("rename_tokens: renamed tokens collide with existing ones")
        if types_field is not None and types is not None:
            fields["tokenizer.ggml.token_type"] = (types_field[0], types_field[1], types)

    fim_keys = {f"tokenizer.ggml.fim_{k}_token_id" for k in _FIM_ID_KEYS}
    fim_keys |= {f"tokenizer.ggml.{k}_token_id" for k in ("prefix", "suffix", "middle")}
    for key, (vtype, sub, value) in fields.items():
        if not key.startswith("tokenizer.") or (strip_fim and key in fim_keys):
            continue
        if key == "tokenizer.ggml.tokens":
            value = tokens
        writer.add_key_value(key, value, gguf.GGUFValueType(vtype),
                             sub_type=None if sub is None else gguf.GGUFValueType(sub))  # fmt: skip
    for kind, token_id in (fim_ids or {}).items():
        if kind not in _FIM_ID_KEYS:
            raise ValueError(f"fim_ids: unknown kind {kind!r} (expected one of {_FIM_ID_KEYS})")
        writer.add_uint32(f"tokenizer.ggml.fim_{kind}_token_id", token_id)
    return len(tokens)


def _byte_level(text: str) -> str:
    """``text`` as byte-level BPE vocabularies (GPT-2, StarCoder) spell it."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return "".join(table[b] for b in text.encode("utf-8"))


def build_tiny_model(
    path: str | os.PathLike[str],
    vocab: str | os.PathLike[str] = "starcoder",
    *,
    seed: int = 0,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_ctx_train: int = 4096,
    dtype: Literal["f32", "f16"] = "f32",
    embd_scale: float = 0.5,
    rename_tokens: Mapping[str, str] | None = None,
    strip_fim: bool = False,
    fim_ids: Mapping[str, int] | None = None,
    stop_bias: float = 0.0,
    token_bias: Mapping[str, float] | None = None,
) -> Path:
    """Write a tiny random-weight llama-architecture GGUF to ``path`` and return it.

    The tokenizer comes from ``vocab`` (see ``vocab_path``). ``rename_tokens`` renames token
    texts (e.g. ``{"<fim_prefix>": "<PRE>"}``) to imitate another FIM family with the same
    BPE; ``strip_fim`` renames every FIM marker away to imitate a model without FIM;
    ``fim_ids`` writes explicit ``tokenizer.ggml.fim_*_token_id`` keys. Renamed tokens
    become control tokens, as special tokens are in real conversions. The output embedding
    is tied to the input one (llama.cpp duplicates it), halving the file size. The same
    arguments always give byte-identical files.

    ``stop_bias`` makes a model that wants to stop: every token embedding gets a
    constant first channel, which survives to the last layer, and the output row
    of the end-of-sequence token reads that channel with this weight (the output
    embedding is then written untied).  With a large bias, end-of-sequence ranks
    first at every step, so constrained decoding stops at the first point where
    the middle is complete: tests of the server get completions that end.
    ``token_bias`` does the same for other tokens, named by their text (byte-level
    BPE vocabularies such as StarCoder's), so that a test model can prefer, say,
    closing brackets.
    """
    import gguf

    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must be a multiple of n_head, n_head of n_head_kv")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    head_dim = n_embd // n_head
    np_dtype = np.float32 if dtype == "f32" else np.float16
    rng = np.random.default_rng(seed)

    def weight(rows: int, cols: int, scale: float) -> np.ndarray[Any, Any]:
        # numpy (rows, cols) becomes ggml ne = [cols, rows]: llama.cpp's {n_in, n_out}.
        return (rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np_dtype)

    def ones() -> np.ndarray[Any, Any]:
        return np.ones(n_embd, dtype=np.float32)  # norms stay f32, as in real conversions

    tmp = out.with_name(out.name + ".tmp")
    writer = gguf.GGUFWriter(tmp, "llama")
    try:
        writer.add_name(f"fimlsp-tiny-{Path(str(vocab)).name}")
        writer.add_context_length(n_ctx_train)
        writer.add_embedding_length(n_embd)
        writer.add_block_count(n_layer)
        writer.add_feed_forward_length(n_ff)
        writer.add_head_count(n_head)
        writer.add_head_count_kv(n_head_kv)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_rope_dimension_count(head_dim)
        writer.add_rope_freq_base(10000.0)
        writer.add_file_type(
            gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16
        )
        n_vocab = _copy_tokenizer(writer, vocab_path(vocab), rename_tokens or {}, strip_fim,
                                  fim_ids)  # fmt: skip
        writer.add_vocab_size(n_vocab)

        embeddings = weight(n_vocab, n_embd, embd_scale)
        if stop_bias or token_bias:
            fields = read_gguf_metadata(vocab_path(vocab))
            biases = {int(fields["tokenizer.ggml.eos_token_id"][2]): stop_bias}
            if token_bias:
                ids = {text: i for i, text in enumerate(fields["tokenizer.ggml.tokens"][2])}
                for text, bias in token_bias.items():
                    key = _byte_level(text)
                    if key not in ids:
                        raise ModelError(f"no token {text!r} in the vocabulary {vocab}")
                    biases[ids[key]] = bias
            output = embeddings.copy()
            embeddings[:, 0] = 4.0 * embd_scale
            output[:, 0] = 0.0
            for token, bias in biases.items():
                output[token, 0] = bias
            writer.add_tensor("output.weight", output)
        writer.add_tensor("token_embd.weight", embeddings)
        writer.add_tensor("output_norm.weight", ones())
        q_scale, o_scale = n_embd**-0.5, (n_head * head_dim) ** -0.5
        for i in range(n_layer):
            blk = f"blk.{i}"
            writer.add_tensor(f"{blk}.attn_norm.weight", ones())
            writer.add_tensor(f"{blk}.attn_q.weight", weight(n_head * head_dim, n_embd, q_scale))
            writer.add_tensor(f"{blk}.attn_k.weight",
                              weight(n_head_kv * head_dim, n_embd, q_scale))  # fmt: skip
            writer.add_tensor(f"{blk}.attn_v.weight",
                              weight(n_head_kv * head_dim, n_embd, q_scale))  # fmt: skip
            writer.add_tensor(f"{blk}.attn_output.weight",
                              weight(n_embd, n_head * head_dim, o_scale))  # fmt: skip
            writer.add_tensor(f"{blk}.ffn_norm.weight", ones())
            writer.add_tensor(f"{blk}.ffn_gate.weight", weight(n_ff, n_embd, q_scale))
            writer.add_tensor(f"{blk}.ffn_up.weight", weight(n_ff, n_embd, q_scale))
            writer.add_tensor(f"{blk}.ffn_down.weight", weight(n_embd, n_ff, n_ff**-0.5))

        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    os.replace(tmp, out)
    return out


def tiny_model_cached(vocab: str = "starcoder", **kwargs: Any) -> Path:
    """``build_tiny_model`` into the cache, keyed by its arguments, building only once."""
    key = hashlib.sha256(repr((vocab, sorted(kwargs.items()))).encode()).hexdigest()[:16]
    target = cache_dir("tiny") / f"tiny-{Path(vocab).name}-{key}.gguf"
    if not target.is_file():
        build_tiny_model(target, vocab, **kwargs)
    return target


# ---------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Build a tiny model or extract vocabularies from a llama-cpp-python sdist."""
    parser = argparse.ArgumentParser(prog="python -m lsp_server.model.tiny")
    sub = parser.add_subparsers(dest="cmd", required=True)
    build = sub.add_parser("build", help="write a tiny random-weight GGUF")
    build.add_argument("out", type=Path)
    build.add_argument("--vocab", default="starcoder", help="vocabulary name or GGUF path")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--n-layer", type=int, default=2)
    build.add_argument("--n-embd", type=int, default=64)
    build.add_argument("--strip-fim", action="store_true")
    extract = sub.add_parser("extract-vocab", help="copy ggml-vocab-*.gguf out of an sdist")
    extract.add_argument("sdist", type=Path)
    extract.add_argument("--dest", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "build":
            out = build_tiny_model(args.out, args.vocab, seed=args.seed, n_layer=args.n_layer,
                                   n_embd=args.n_embd, strip_fim=args.strip_fim)  # fmt: skip
            print(out)
        else:
            for path in extract_vocabs(args.sdist, args.dest):
                print(path)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
