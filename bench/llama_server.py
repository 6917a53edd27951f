"""llama.cpp's own ``llama-server``, built from the sources llama-cpp-python vendors, and run.

Usage::

    python -m bench.llama_server [--print-path] [--sdist PATH] [--jobs N] [--rebuild]
        [--source LLAMA_CPP_DIR] [--cuda] [--cmake-arg ARG ...]
    python -m bench.llama_server --serve MODEL.gguf [--parallel N] [--api-key KEY]

The remote backend talks to inference servers; the tests and benchmarks need a real one
that runs here. llama-cpp-python's source distribution vendors the whole of llama.cpp
(``vendor/llama.cpp``), so the server comes from exactly the llama.cpp the in-process
backend runs: same kernels, same tokenizer, the same greedy tokens. It is built once, with
portable flags (no ``-march=native``), into fimlsp's cache under a folder keyed by the
sdist's version and the build flags; later calls print the cached binary at once. The
last line printed is the binary's path.

The sdist is the installed llama-cpp-python's version, taken from the cache, from
``--sdist`` or with ``pip download`` (which finds it in pip's own cache when pip built the
wheel from it). Only the parts of ``vendor/llama.cpp`` the build reads are extracted.

``running_llama_server`` starts one on 127.0.0.1 on a free port, waits for ``/health``
and always stops it: the tests' and benchmarks' fixture.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import http.client
import importlib.metadata
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lsp_server.model.cache import cache_dir

__all__ = [
    "BUILD_FLAGS",
    "CUDA_FLAGS",
    "BuildFailed",
    "BuildUnavailable",
    "LlamaServer",
    "build_llama_server",
    "cached_binary",
    "free_port",
    "llama_cpp_version",
    "running_llama_server",
    "start_llama_server",
    "vendored_path",
]

#: CMake flags of the build: portable (no -march=native), one static binary, nothing but
#: the server. No prebuilt web UI (it would be fetched from Hugging Face) and no CURL
#: (models are always local files here); HTTPS where OpenSSL's headers are installed.
BUILD_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_COMMON=ON",
)
#: The same build with llama.cpp's CUDA backend, for Hopper (H100, H200): one
#: architecture only, since every CUDA architecture multiplies the kernels' compile time.
CUDA_FLAGS: tuple[str, ...] = (*BUILD_FLAGS, "-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90")
TARGET = "llama-server"
_VENDOR = "vendor/llama.cpp/"
#: Folders of ``vendor/llama.cpp`` no part of the server's build reads (test models,
#: documentation, Python packages, the web UI's sources, disabled examples and tests).
_SKIPPED = (
    "models/",
    "docs/",
    "media/",
    ".github/",
    ".devops/",
    "gguf-py/",
    "examples/",
    "tests/",
    "pocs/",
    "benches/",
    "conversion/",
    "tools/ui/src/",
    "tools/ui/static/",
    "tools/ui/tests/",
)


class BuildUnavailable(RuntimeError):
    """llama-server cannot be built on this machine (no CMake or compiler, no sdist)."""


class BuildFailed(RuntimeError):
    """The build ran and failed: a real error, not a reason to skip."""


# ---------------------------------------------------------------- build


def llama_cpp_version() -> str:
    """The installed llama-cpp-python's version: the llama.cpp the server must match."""
    try:
        return importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError as exc:
        raise BuildUnavailable("llama-cpp-python is not installed") from exc


def _flags_key(flags: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(flags).encode()).hexdigest()[:12]


def _build_dir(version: str, flags: Sequence[str], root: Path | None) -> Path:
    """``<cache>/llama-server/<version>-<flags hash>``; ``root`` replaces fimlsp's cache."""
    base = (root if root is not None else cache_dir()) / "llama-server"
    return base / f"{version}-{_flags_key(flags)}"


def cached_binary(
    version: str | None = None, flags: Sequence[str] = BUILD_FLAGS, root: Path | None = None
) -> Path | None:
    """The cached binary for this version and flags, if it was built (``root``: a cache
    folder other than fimlsp's)."""
    binary = _build_dir(version or llama_cpp_version(), flags, root) / "bin" / TARGET
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def _missing_tools(flags: Sequence[str] = ()) -> list[str]:
    missing = [tool for tool in ("cmake",) if shutil.which(tool) is None]
    if "-DGGML_CUDA=ON" in flags and shutil.which("nvcc") is None:
        missing.append("nvcc (the CUDA toolkit)")
    if not any(
        shutil.which(cxx) for cxx in (os.environ.get("CXX", ""), "c++", "g++", "clang++") if cxx
    ):
        missing.append("a C++ compiler (c++, g++ or clang++)")
    if not any(shutil.which(cc) for cc in (os.environ.get("CC", ""), "cc", "gcc", "clang") if cc):
        missing.append("a C compiler (cc, gcc or clang)")
    return missing


def locate_sdist(version: str, sdist: Path | None, into: Path, log: Callable[[str], None]) -> Path:
    """The llama-cpp-python source distribution of ``version``: given, cached or downloaded.

    ``pip download`` answers from pip's HTTP cache when pip fetched the sdist before (to
    build the installed wheel), and from PyPI otherwise.
    """
    if sdist is not None:
        if not sdist.is_file():
            raise BuildUnavailable(f"source distribution not found: {sdist}")
        return sdist
    into.mkdir(parents=True, exist_ok=True)
    for name in (f"llama_cpp_python-{version}.tar.gz", f"llama-cpp-python-{version}.tar.gz"):
        if (into / name).is_file():
            return into / name
    log(f"fetching the llama-cpp-python {version} source distribution with pip download")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--dest",
        str(into),
        f"llama-cpp-python=={version}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(into.glob(f"llama*cpp*python-{version}.tar.gz"))
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise BuildUnavailable(
            f"cannot fetch the llama-cpp-python {version} source distribution "
            f"(pip download failed: {' / '.join(tail)}); give one with --sdist PATH"
        )
    return found[0]


def vendored_path(name: str) -> str | None:
    """A member of the sdist (``top/vendor/llama.cpp/...``): its path in llama.cpp if the
    server's build reads it, else None."""
    _, _, rest = name.partition("/")
    if not rest.startswith(_VENDOR):
        return None
    inner = rest[len(_VENDOR) :]
    return None if any(inner.startswith(skip) for skip in _SKIPPED) else inner


def extract_vendored(sdist: Path, dest: Path) -> Path:
    """Extract the parts of ``vendor/llama.cpp`` the build reads; return its root."""
    root: Path | None = None
    try:
        with tarfile.open(sdist, "r:*") as tar:
            for member in tar:
                if vendored_path(member.name) is None:
                    continue
                if not (member.isfile() or member.isdir()):
                    continue  # links and devices: none are needed
                top = member.name.partition("/")[0]
                tar.extract(member, dest, filter="data")
                root = dest / top / _VENDOR.rstrip("/")
    except (OSError, tarfile.TarError) as exc:
        raise BuildUnavailable(f"cannot read source distribution {sdist}: {exc}") from exc
    if root is None or not (root / "CMakeLists.txt").is_file():
        raise BuildUnavailable(f"{sdist} does not vendor llama.cpp (no {_VENDOR}CMakeLists.txt)")
    return root


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock file, so that two processes never build into one folder at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_logged(cmd: Sequence[str], cwd: Path, log_file: IO[str]) -> None:
    log_file.write("$ " + " ".join(cmd) + "\n")
    log_file.flush()
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(cwd.parent))
    done = subprocess.run(cmd, cwd=cwd, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise BuildFailed(f"{cmd[0]} failed with code {done.returncode}; see {log_file.name}")


def build_llama_server(
    sdist: Path | None = None,
    *,
    jobs: int = 2,
    rebuild: bool = False,
    root: Path | None = None,
    flags: Sequence[str] = BUILD_FLAGS,
    source: Path | None = None,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> Path:
    """Build ``llama-server`` once into the cache and return the binary's path.

    The sources are the sdist's ``vendor/llama.cpp``, or ``source``: a llama.cpp tree
    (the GPU payload's trimmed copy), cached under its folder's name.
    Raises ``BuildUnavailable`` where it cannot be built here (no CMake or compiler, no
    source distribution) and ``BuildFailed`` when the build itself fails.
    """
    if source is not None:
        version = f"source-{source.resolve().name}"
    else:
        version = llama_cpp_version() if sdist is None else _sdist_version(sdist)
    folder = _build_dir(version, flags, root)
    binary = folder / "bin" / TARGET
    with _locked(folder.with_name(folder.name + ".lock")):
        if not rebuild and cached_binary(version, flags, root) is not None:
            return binary
        missing = _missing_tools(flags)
        if missing:
            raise BuildUnavailable(f"cannot build llama-server: {', '.join(missing)} not found")
        folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="build-", dir=folder) as tmp:
            work = Path(tmp)
            if source is not None:
                if not (source / "CMakeLists.txt").is_file():
                    raise BuildUnavailable(f"{source} is no llama.cpp tree (no CMakeLists.txt)")
                src = source.resolve()
            else:
                found = locate_sdist(version, sdist, (root or cache_dir()) / "sdist", log)
                log(f"extracting llama.cpp from {found}")
                src = extract_vendored(found, work / "src")
            log_path = folder / "build.log"
            log(f"building {TARGET} from {version} with {jobs} jobs (log: {log_path})")
            built = _compile(src, work / "build", flags, jobs, log_path)
            binary.parent.mkdir(parents=True, exist_ok=True)
            tmp_binary = binary.with_name(TARGET + ".tmp")
            shutil.copy2(built, tmp_binary)
            os.replace(tmp_binary, binary)
        seconds = time.monotonic() - started
        info = {"version": version, "flags": list(flags), "jobs": jobs, "seconds": round(seconds)}
        (folder / "build.json").write_text(json.dumps(info, indent=2) + "\n")
        log(f"built {TARGET} in {seconds / 60:.1f} min")
    return binary


def _compile(src: Path, build: Path, flags: Sequence[str], jobs: int, log_path: Path) -> Path:
    """Configure (Ninja where installed) and build the server target; the built binary."""
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    with log_path.open("w") as log_file:
        _run_logged(
            ["cmake", "-S", str(src), "-B", str(build), *generator, *flags], build.parent, log_file
        )
        _run_logged(
            ["cmake", "--build", str(build), "--target", TARGET, "--parallel", str(max(1, jobs))],
            build.parent,
            log_file,
        )
    built = next((p for p in (build / "bin" / TARGET, build / TARGET) if p.is_file()), None)
    if built is None:
        raise BuildFailed(f"the build produced no {TARGET}; see {log_path}")
    return built


def _sdist_version(sdist: Path) -> str:
    """``1.2.3`` from ``llama_cpp_python-1.2.3.tar.gz``."""
    name = sdist.name
    for suffix in (".tar.gz", ".tar.xz", ".tgz", ".zip"):
        name = name.removesuffix(suffix)
    stem, _, version = name.rpartition("-")
    if not stem or not version:
        raise BuildUnavailable(f"cannot read a version from the file name {sdist.name}")
    return version


# ---------------------------------------------------------------- run


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class LlamaServer:
    """A running llama-server: its address, process and log."""

    url: str
    port: int
    model: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    api_key: str | None = None
    args: list[str] = field(default_factory=list)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL): always leaves no process behind."""
        proc = self.process
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _healthy(port: int, tls: bool) -> bool:
    if tls:  # the test's own self-signed certificate: nothing to verify it against here
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=2, context=context
        )
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/health")  # public: no API key needed
        response = conn.getresponse()
        response.read()
        return response.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def start_llama_server(
    binary: Path,
    model: Path,
    *,
    parallel: int = 1,
    ctx_size: int = 2048,
    threads: int = 1,
    api_key: str | None = None,
    cache_reuse: int = 0,
    tls: tuple[Path, Path] | None = None,
    extra_args: Sequence[str] = (),
    port: int | None = None,
    log_dir: Path | None = None,
    startup_timeout: float = 120.0,
) -> LlamaServer:
    """Start ``llama-server`` on 127.0.0.1 and wait until ``/health`` answers 200.

    ``ctx_size`` is the whole KV cache: each of the ``parallel`` slots gets an equal share.
    Flash attention is off, as in the in-process backend on a CPU, so that both compute
    the same logits; ``--no-webui`` because the build has none. ``tls`` (certificate, key)
    serves HTTPS (a build with OpenSSL). Raises ``RuntimeError`` with the server's last
    log lines if it exits or does not come up in time.
    """
    port = port or free_port()
    args = [
        str(binary),
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ctx-size",
        str(ctx_size),
        "--parallel",
        str(parallel),
        "--threads",
        str(threads),
        "--threads-batch",
        str(threads),
        "--n-gpu-layers",
        "0",
        "--flash-attn",
        "off",
        "--no-webui",
        "--props",
        "--slots",
        "--metrics",
    ]
    if cache_reuse:
        args += ["--cache-reuse", str(cache_reuse)]
    if api_key:
        args += ["--api-key", api_key]
    if tls is not None:
        args += ["--ssl-cert-file", str(tls[0]), "--ssl-key-file", str(tls[1])]
    args += list(extra_args)
    folder = log_dir if log_dir is not None else Path(tempfile.mkdtemp(prefix="llama-server-"))
    log_path = folder / f"llama-server-{port}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            args, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    scheme = "https" if tls is not None else "http"
    server = LlamaServer(
        f"{scheme}://127.0.0.1:{port}", port, model, process, log_path, api_key, args
    )
    deadline = time.monotonic() + startup_timeout
    while not _healthy(port, tls is not None):
        if process.poll() is not None:
            raise RuntimeError(
                f"llama-server exited with code {process.returncode}:\n{server.log_tail()}"
            )
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(
                f"llama-server did not answer /health in {startup_timeout:.0f} s:"
                f"\n{server.log_tail()}"
            )
        time.sleep(0.05)
    return server


@contextlib.contextmanager
def running_llama_server(binary: Path, model: Path, **kwargs: Any) -> Iterator[LlamaServer]:
    """``start_llama_server`` as a context manager that always stops the process."""
    server = start_llama_server(binary, model, **kwargs)
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Build (once) and print the binary's path; or run a server in the foreground."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.llama_server", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--print-path",
        action="store_true",
        help="print the binary's path as the last line (the default)",
    )
    parser.add_argument("--sdist", type=Path, help="llama-cpp-python source distribution")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (2)")
    parser.add_argument(
        "--source", type=Path, help="a llama.cpp source tree to build instead of the sdist's"
    )
    parser.add_argument(
        "--cuda", action="store_true", help="with the CUDA backend for Hopper (CUDA_FLAGS)"
    )
    parser.add_argument(
        "--cmake-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more CMake argument (repeatable; part of the cache key)",
    )
    parser.add_argument("--rebuild", action="store_true", help="build even if cached")
    parser.add_argument("--serve", type=Path, metavar="MODEL", help="run a server on MODEL")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--ctx-size", type=int, default=4096)
    parser.add_argument("--api-key")
    args = parser.parse_args(argv)
    try:
        binary = build_llama_server(
            args.sdist,
            jobs=args.jobs,
            rebuild=args.rebuild,
            source=args.source,
            flags=(*(CUDA_FLAGS if args.cuda else BUILD_FLAGS), *args.cmake_arg),
        )
    except BuildUnavailable as exc:
        print(f"llama-server unavailable: {exc}", file=sys.stderr)
        return 2
    except BuildFailed as exc:
        print(f"llama-server build failed: {exc}", file=sys.stderr)
        return 1
    if args.serve is None:
        print(binary)
        return 0
    with running_llama_server(
        binary, args.serve, parallel=args.parallel, ctx_size=args.ctx_size, api_key=args.api_key
    ) as server:
        print(f"llama-server on {server.url} (log: {server.log_path}); Ctrl-C stops it")
        with contextlib.suppress(KeyboardInterrupt):
            server.process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
