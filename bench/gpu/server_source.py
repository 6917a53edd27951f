"""The sources of ``llama-server`` for the GPU machine, packed here into the GPU payload.

Usage::

    python -m bench.gpu.server_source [--out .gpu_payload] [--sdist PATH]

The GPU machine has no registry and takes at most 64 MiB per call, and the trimmed
llama-cpp-python sdist of ``bench.gpu.pack`` holds what libllama's build reads, not the
server's (``tools/server``).  This writes ``llama-server-src-<version>.tar.xz``: the
members of the installed llama-cpp-python's sdist that ``bench.llama_server``'s build
reads (:func:`bench.llama_server.vendored_path`), less the sources of GPU backends other
than CUDA, in the sdist's own layout, so that on the machine
``python -m bench.llama_server --sdist THAT --cuda`` builds it as the CPU build is built
here (``bench/gpu/build_llama_server.sh`` does).
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

from bench.llama_server import llama_cpp_version, locate_sdist, vendored_path
from lsp_server.model.cache import cache_dir

__all__ = ["OTHER_BACKENDS", "pack_server_source"]

#: ggml's backends a CUDA build never compiles.
OTHER_BACKENDS = tuple(
    f"ggml/src/ggml-{name}/"
    for name in ("opencl", "vulkan", "hexagon", "sycl", "metal", "et", "webgpu", "openvino",
                 "cann", "virtgpu", "zendnn", "zdnn", "hip", "musa", "blas", "rpc", "kompute")
)  # fmt: skip


def pack_server_source(sdist: Path, out_dir: Path, version: str) -> Path:
    """Write ``llama-server-src-<version>.tar.xz`` into ``out_dir``; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"llama-server-src-{version}.tar.xz"
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(sdist, "r:*") as src, tarfile.open(tmp, "w:xz", preset=9) as dst:
        for member in src:
            inner = vendored_path(member.name)
            if inner is None or not (member.isfile() or member.isdir()):
                continue
            if any(inner.startswith(skip) for skip in OTHER_BACKENDS):
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    tmp.replace(out)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.server_source")
    parser.add_argument("--out", type=Path, default=Path(".gpu_payload"))
    parser.add_argument("--sdist", type=Path, help="llama-cpp-python source distribution")
    args = parser.parse_args(argv)
    version = llama_cpp_version()
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    sdist = locate_sdist(version, args.sdist, cache_dir() / "sdist", log)
    out = pack_server_source(sdist, args.out, version)
    print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
