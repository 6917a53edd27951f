"""Everything issue 32 measures on the GPU machine, in one command under 9 minutes.

Usage (on the device, from the repository's root, ``.gpu_payload`` carried)::

    bash bench/gpu/run.sh [--out DIR] [--budget-s 540] [--n 8] [--cpu-smoke]

It runs with nothing but the machine's own image and the payload of ``bench.gpu.pack``
(no package registry there); each phase is timed, and a phase that would not finish
within the budget is skipped with a message saying so:

1. the device (``nvidia-smi``, ``nvcc``), the payload's wheels into a private
   ``site`` folder (first on ``PYTHONPATH`` for every step after);
2. llama-cpp-python built from the trimmed sdist with pip, offline, with CUDA for
   Hopper only (``-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAVA_BUILD=OFF``,
   ninja, every core); cuBLAS is looked for in the CUDA toolkit, then in the Python
   packages (``nvidia/*``) of the image, since pip-installed toolkits lack it;
   meanwhile the random-weight models of ``bench.gpu.models`` are written
   (0.5B, 1.5B, 7B in Q8_0) to ``/dev/shm`` when it has room;
3. ``bench.gpu.parser_replay``: the parser's time per token on real middles;
4. ``bench.fim_quality`` per shape, all layers on the GPU, constrained, unconstrained
   and checked on the same cuts (1.5B, 7B, then 0.5B);
5. ``bench.lsp_latency`` on the 1.5B shape (typing sessions and the cold-open case);
6. ``summary.md``, ``results.json`` (every benchmark's JSON as it wrote it, and the
   phases' times), ``speed.png``, ``run.log`` and the build's log into ``--out``
   (default ``$OUT``): at most 8 files, as the device returns.

``--cpu-smoke`` runs the same steps here with CUDA off, the ``tiny`` shape and a few
cuts: the check that the command works before device time is spent on it.
"""

from __future__ import annotations

import argparse
import glob
import json
import lzma
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = ROOT / ".gpu_payload"
CUDA_ARGS = ("-DGGML_CUDA=on", "-DCMAKE_CUDA_ARCHITECTURES=90", "-DLLAVA_BUILD=OFF")
CPU_ARGS = ("-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF")
#: Seconds each phase needs at least, or it is skipped (device; the smoke scales them).
MIN_S = {"build": 150, "quality": 45, "replay": 20, "latency": 60}
#: Seconds kept back at the end for the summary and the plot.
RESERVE_S = 15


@dataclass
class Run:
    """The run's clock, log and results."""

    out: Path
    work: Path
    budget_s: float
    smoke: bool
    started: float = field(default_factory=time.monotonic)
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def log(self, line: str) -> None:
        stamp = f"[{time.monotonic() - self.started:6.1f}s]"
        print(f"{stamp} {line}", flush=True)
        with (self.out / "run.log").open("a") as f:
            f.write(f"{stamp} {line}\n")

    def can(self, phase: str, need: float) -> bool:
        """Whether ``need`` seconds are left for ``phase`` (else it is skipped, said)."""
        left = self.left() - RESERVE_S
        if left >= need:
            return True
        self.log(f"SKIPPED {phase}: {left:.0f} s left of the budget, it needs {need:.0f} s")
        self.phases[phase] = {"skipped": True, "left_s": round(left)}
        return False

    def sh(
        self,
        phase: str,
        cmd: Sequence[str],
        *,
        timeout: float | None = None,
        stdout: Path | None = None,
        env: dict[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> int:
        """Run ``cmd`` (stderr to run.log, stdout to ``stdout`` or run.log), timed."""
        self.log(f"{phase}: $ {' '.join(cmd)}")
        t0 = time.monotonic()
        with (self.out / "run.log").open("a") as log:
            out = stdout.open("w") if stdout is not None else log
            try:
                done = subprocess.run(
                    cmd, cwd=cwd, env=env or self.env, stdout=out, stderr=log, timeout=timeout
                )
                code = done.returncode
            except subprocess.TimeoutExpired:
                code = -9
                self.log(f"{phase}: stopped after {timeout:.0f} s (the budget)")
            finally:
                if stdout is not None:
                    out.close()
        seconds = time.monotonic() - t0
        self.phases[phase] = {"seconds": round(seconds, 1), "exit": code}
        self.log(f"{phase}: exit {code} in {seconds:.1f} s")
        return code


# ---------------------------------------------------------------- steps


def device_info(run: Run) -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
    }
    query = "name,driver_version,memory.total,clocks.max.sm"
    for key, cmd in (
        ("gpu", ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"]),
        ("nvcc", ["nvcc", "--version"]),
        ("cuda_driver", ["nvidia-smi"]),
    ):
        try:
            text = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if key == "cuda_driver":
            line = next((ln for ln in text.splitlines() if "CUDA Version" in ln), "")
            info[key] = line.split("CUDA Version:")[-1].strip(" |") if line else None
        elif key == "nvcc":
            info[key] = text.strip().splitlines()[-1] if text.strip() else None
        else:
            info[key] = text.strip() or None
    info["disk_free_gib"] = round(shutil.disk_usage(run.work).free / 2**30, 1)
    return info


def install_wheels(run: Run, site: Path) -> None:
    wheels = sorted(glob.glob(str(PAYLOAD / "wheels" / "*.whl")))
    run.sh(
        "wheels",
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            str(site),
            *wheels,
        ],
    )


def find_cublas(work: Path) -> tuple[list[str], list[str]]:
    """CMake arguments and library folders for cuBLAS where the CUDA toolkit lacks it
    (a toolkit assembled from pip packages): the libraries of the Python package
    ``nvidia-cublas`` (``site-packages/nvidia/cu13/lib``), and its headers alone, linked
    into a folder of their own (beside them lie other packages' CUDA headers, which must
    not shadow the compiler's).  Nothing if the toolkit has it.  ``FIMLSP_CUBLAS_ROOT``
    names one more folder to search."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    toolkit = Path(os.path.realpath(nvcc)).parent.parent
    for lib in ("lib64", "lib", "targets/x86_64-linux/lib"):
        if list((toolkit / lib).glob("libcublas.so*")):
            return [], []
    roots = {p for p in sys.path if p.endswith("-packages")}
    roots.update(glob.glob("/opt/*/.venv/lib/python3*/site-packages"))
    roots.update(glob.glob("/usr/local/lib/python3*/dist-packages"))
    if os.environ.get("FIMLSP_CUBLAS_ROOT"):
        roots.add(os.environ["FIMLSP_CUBLAS_ROOT"])
    for root in sorted(roots):
        libs = sorted(glob.glob(f"{root}/nvidia/**/libcublas.so*", recursive=True))
        lights = sorted(glob.glob(f"{root}/nvidia/**/libcublasLt.so*", recursive=True))
        headers = sorted(glob.glob(f"{root}/nvidia/**/cublas_v2.h", recursive=True))
        if libs and lights and headers:
            break
    else:
        return [], []
    include = work / "cublas-include"
    shutil.rmtree(include, ignore_errors=True)
    include.mkdir(parents=True)
    for header in Path(headers[0]).parent.glob("cublas*.h"):
        (include / header.name).symlink_to(header)
    args = [
        f"-DCUDA_cublas_LIBRARY={libs[0]}",
        f"-DCUDA_cublasLt_LIBRARY={lights[0]}",
        f"-DCMAKE_CUDA_FLAGS=-I{include}",
    ]
    return args, [str(Path(libs[0]).parent)]


def find_cuda_driver() -> list[str]:
    """CMake arguments for the CUDA driver library (``CUDA::cuda_driver``, which ggml's
    virtual-memory pool links): a toolkit from pip packages has no ``stubs/libcuda.so``,
    and the driver's own folder may hold only ``libcuda.so.1``, which CMake's search by
    name misses.  Without any, ggml is built without that pool (``GGML_CUDA_NO_VMM``)."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    toolkit = Path(os.path.realpath(nvcc)).parent.parent
    for lib in ("lib64/stubs", "lib/stubs", "targets/x86_64-linux/lib/stubs"):
        if (toolkit / lib / "libcuda.so").is_file():
            return []
    found: list[str] = []
    try:
        listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        found += [
            ln.split("=>")[-1].strip()
            for ln in listed.splitlines()
            if ln.strip().startswith("libcuda.so")
        ]
    except OSError:
        pass
    for pattern in (
        "/usr/local/nvidia/lib64/libcuda.so*",
        "/usr/lib/x86_64-linux-gnu/libcuda.so*",
        "/usr/lib64/libcuda.so*",
        "/usr/local/cuda/compat/libcuda.so*",
    ):
        found += sorted(glob.glob(pattern))
    found = [f for f in found if Path(f).exists()]
    if not found:
        return ["-DGGML_CUDA_NO_VMM=ON"]
    return [f"-DCUDA_cuda_driver_LIBRARY={found[0]}"]


def build_llama(run: Run, site: Path, cmake_extra: Sequence[str] = ()) -> bool:
    """llama-cpp-python from the trimmed sdist into ``site``; True when it imports."""
    tars = sorted(PAYLOAD.glob("llama_cpp_python-*.tar.xz"))
    if not tars:
        run.log("no llama_cpp_python-*.tar.xz in the payload: run python -m bench.gpu.pack")
        return False
    src = run.work / "src"
    shutil.rmtree(src, ignore_errors=True)
    with tarfile.open(tars[0]) as tar:
        tar.extractall(src, filter="data")
    sdist = next(src.iterdir())
    args = [*(CPU_ARGS if run.smoke else CUDA_ARGS), *cmake_extra]
    if not run.smoke:
        extra, lib_dirs = find_cublas(run.work)
        driver = find_cuda_driver()
        run.log(f"CUDA driver library: {' '.join(driver) or 'in the toolkit'}")
        args += extra + driver
        if lib_dirs:
            run.log(f"cuBLAS from Python packages: {' '.join(extra)}")
            ld = ":".join([*lib_dirs, run.env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
            run.env["LD_LIBRARY_PATH"] = ld
        if shutil.which("nvcc") is None and Path("/usr/local/cuda/bin/nvcc").exists():
            run.env["CUDACXX"] = "/usr/local/cuda/bin/nvcc"
    env = dict(
        run.env,
        CMAKE_ARGS=" ".join(args),
        CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count()),
        FORCE_CMAKE="1",
    )
    if run.smoke:
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    run.log(f"building {sdist.name} with CMAKE_ARGS={env['CMAKE_ARGS']}")
    code = run.sh(
        "build",
        [
            "nice",
            "-n",
            "10",
            sys.executable,
            "-m",
            "pip",
            "install",
            "-v",
            "--no-index",
            "--no-build-isolation",
            "--no-deps",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            str(site),
            str(sdist),
        ],
        stdout=run.work / "build.log",
        timeout=run.left() - RESERVE_S,
        env=env,
    )
    _keep_build_log(run)
    if code != 0:
        return False
    check = (
        "import llama_cpp, sys; print(llama_cpp.__version__, llama_cpp.__file__, "
        "llama_cpp.llama_supports_gpu_offload())"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], env=run.env, capture_output=True, text=True, cwd=ROOT
    )
    run.log(f"llama_cpp: {done.stdout.strip()} {done.stderr.strip()[-300:]}")
    run.results["llama_cpp"] = done.stdout.strip()
    ok = done.returncode == 0 and str(site) in done.stdout
    return ok and (run.smoke or done.stdout.strip().endswith("True"))


def _keep_build_log(run: Run) -> None:
    """The build's log, xz-compressed (verbose: every compiler line)."""
    log = run.work / "build.log"
    if log.is_file():
        (run.out / "build.log.xz").write_bytes(lzma.compress(log.read_bytes()))


def start_models(run: Run, shapes: Sequence[str], folder: Path) -> subprocess.Popen[bytes]:
    """Write the models in the background (one process, one after the other)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        f"{sys.executable} -m bench.gpu.models --shape {s} --out {folder}/{s}.gguf" for s in shapes
    ]
    run.log(f"models into {folder}: {', '.join(shapes)} (background)")
    log = (run.out / "run.log").open("a")
    return subprocess.Popen(
        ["bash", "-c", " && ".join(lines)], cwd=ROOT, env=run.env, stdout=log, stderr=log
    )


def model_folder(run: Run, need_gib: float) -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free / 2**30 > need_gib + 4:
        return shm / "fimlsp-gpu-models"
    return run.work / "models"


def quality(run: Run, shape: str, model: Path, n: int) -> None:
    phase = f"quality-{shape}"
    if not run.can(phase, MIN_S["quality"]):
        return
    out = run.work / f"{phase}.json"
    threads = "1" if run.smoke else "4"
    layers = "0" if run.smoke else "-1"
    code = run.sh(
        phase,
        [
            sys.executable,
            "-m",
            "bench.fim_quality",
            "--model",
            str(model),
            "--n",
            str(n),
            "--max-tokens",
            "32",
            "--threads",
            threads,
            "--gpu-layers",
            layers,
            "--json",
            "--no-progress",
        ],
        stdout=out,
        timeout=run.left() - RESERVE_S,
    )
    _take_json(run, phase, out, code)


def replay(run: Run, vocab_model: Path) -> None:
    middles = PAYLOAD / "middles.json.xz"
    if not middles.is_file():
        run.log("SKIPPED replay: no middles.json.xz in the payload")
        return
    if not run.can("replay", MIN_S["replay"]):
        return
    out = run.work / "replay.json"
    cmd = [
        sys.executable,
        "-m",
        "bench.gpu.parser_replay",
        "--middles",
        str(middles),
        "--model",
        str(vocab_model),
        "--json",
    ]
    if run.smoke:
        cmd += ["--limit", "2"]
    code = run.sh("replay", cmd, stdout=out, timeout=run.left() - RESERVE_S)
    _take_json(run, "replay", out, code)


def latency(run: Run, model: Path) -> None:
    if not run.can("latency", MIN_S["latency"]):
        return
    out = run.work / "latency.json"
    requests, cold = ("20", "2") if run.smoke else ("150", "6")
    threads = "1" if run.smoke else "4"
    code = run.sh(
        "latency",
        [
            sys.executable,
            "-m",
            "bench.lsp_latency",
            "--model",
            str(model),
            "--requests",
            requests,
            "--cold-open",
            cold,
            "--threads",
            threads,
            "--json",
            "--no-progress",
        ],
        stdout=out,
        timeout=run.left() - RESERVE_S,
    )
    _take_json(run, "latency", out, code)


def _take_json(run: Run, phase: str, path: Path, code: int) -> None:
    try:
        run.results[phase] = json.loads(path.read_text())
    except (OSError, ValueError):
        run.log(f"{phase}: no JSON (exit {code})")


# ---------------------------------------------------------------- the report


def _ms_per_token(mode: dict[str, Any]) -> float | None:
    tps = mode.get("tokens_per_s")
    return round(1000.0 / tps, 2) if tps else None


def summary(run: Run, shapes: Sequence[str]) -> str:
    r, dev = run.results, run.results.get("device", {})
    lines = [
        f"# fimlsp on the GPU ({time.strftime('%Y-%m-%d')})",
        "",
        f"Device: {dev.get('gpu') or 'none (CPU smoke)'}; nvcc: {dev.get('nvcc')}; "
        f"CUDA (driver): {dev.get('cuda_driver')}; Python {dev.get('python')}, "
        f"{dev.get('cores')} cores.",
        f"llama_cpp: {r.get('llama_cpp')}",
        "",
        "| shape | cuts | tok/s unconstrained | tok/s constrained | ms/token uncon. | "
        "parser µs/token median / p99 (these cuts) | wall ratio c/u | generate ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for shape in shapes:
        q = r.get(f"quality-{shape}")
        if q is None:
            lines.append(f"| {shape} | skipped or failed | | | | | | |")
            continue
        u, c = q.get("unconstrained", {}), q.get("constrained", {})
        lines.append(
            f"| {shape} | {q.get('cases')} | {u.get('tokens_per_s')} | "
            f"{c.get('tokens_per_s')} | {_ms_per_token(u)} | "
            f"{q.get('parser_us_per_token_median')} / {q.get('parser_us_per_token_p99')} | "
            f"{q.get('wall_ratio_constrained_over_unconstrained')} | "
            f"{q.get('generate_ratio_constrained_over_unconstrained')} |"
        )
    rep = r.get("replay")
    lines.append("")
    if rep:
        lines.append(
            f"Parser on real middles (replay of {rep['cuts']} Qwen2.5-Coder 0.5B "
            f"middles, {rep['tokens']} tokens): µs/token median "
            f"{rep['parser_us_per_token_median']}, p90 {rep['parser_us_per_token_p90']}, "
            f"p99 {rep['parser_us_per_token_p99']}; same middle {rep['same_middle']}/"
            f"{rep['cuts'] * rep['repeat']}, diverged {rep['diverged_cuts']}."
        )
        for shape in shapes:
            q = r.get(f"quality-{shape}")
            ms = _ms_per_token(q.get("unconstrained", {})) if q else None
            med = rep.get("parser_us_per_token_median")
            if ms and med is not None:
                lines.append(
                    f"- {shape}: parser median {med} µs beside {ms} ms per GPU token "
                    f"= {med / (ms * 1e3):.1%} of a step"
                )
    lat = r.get("latency")
    if lat:
        cold = lat.get("cold_open", {})
        lines += [
            "",
            f"lsp_latency ({Path(str(lat.get('model'))).name}): "
            f"{lat.get('answered')} answered, p50 "
            f"{lat.get('latency_ms_p50')} ms, p95 {lat.get('latency_ms_p95')} ms; at "
            f"pauses p50 {lat.get('pause_latency_ms_p50')} ms; model load "
            f"{lat.get('model_load_s')} s; cold open ({cold.get('files')} files of "
            f"{cold.get('package')}): p50 {cold.get('latency_ms_p50')} ms, p95 "
            f"{cold.get('latency_ms_p95')} ms, max {cold.get('latency_ms_max')} ms",
        ]
    lines += [
        "",
        "Phases (s): "
        + ", ".join(
            f"{k} {'skipped' if v.get('skipped') else v.get('seconds', v.get('waited_s'))}"
            for k, v in run.phases.items()
        ),
    ]
    return "\n".join(lines) + "\n"


def plot(run: Run, shapes: Sequence[str]) -> None:
    """ms per token per shape, unconstrained and constrained, with the parser's replayed
    median per token on top (skipped where matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        run.log("no matplotlib: no plot")
        return
    have = [s for s in shapes if f"quality-{s}" in run.results]
    if not have:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = range(len(have))
    for offset, mode in ((-0.2, "unconstrained"), (0.2, "constrained")):
        ys = [_ms_per_token(run.results[f"quality-{s}"].get(mode, {})) or 0.0 for s in have]
        ax.bar([x + offset for x in xs], ys, width=0.4, label=f"{mode} ms/token")
    rep = run.results.get("replay")
    if rep and rep.get("parser_us_per_token_median") is not None:
        ax.axhline(
            rep["parser_us_per_token_median"] / 1e3,
            color="k",
            ls="--",
            label="parser per token, real middles (median)",
        )
    ax.set_xticks(list(xs), have)
    ax.set_ylabel("ms per token")
    ax.set_title(run.results.get("device", {}).get("gpu") or "CPU smoke")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(run.out / "speed.png", dpi=120)


# ---------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="bench/gpu/run.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-out"))
    p.add_argument("--work", type=Path, default=Path("/tmp/fimlsp-gpu"))
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--n", type=int, default=8, help="cuts of each kind per shape")
    p.add_argument("--cpu-smoke", action="store_true", help="CUDA off, the tiny shape")
    p.add_argument("--shapes", default="1.5b,7b,0.5b")
    p.add_argument(
        "--skip-build",
        action="store_true",
        help="use the llama-cpp-python already installed (a check of the other steps)",
    )
    p.add_argument(
        "--cmake-extra",
        default="",
        help="more CMake arguments, e.g. -DGGML_CUDA_FA=OFF (no flash-attention kernels: "
        "a shorter build)",
    )
    args = p.parse_args(argv)
    out, work = args.out.resolve(), args.work.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    run = Run(out, work, args.budget_s, args.cpu_smoke)
    shapes = ["tiny"] if args.cpu_smoke else args.shapes.split(",")
    n = 1 if args.cpu_smoke else args.n
    if args.cpu_smoke:
        for key in MIN_S:
            MIN_S[key] = 10
    site = work / "site"
    run.env["PYTHONPATH"] = f"{site}:{ROOT}"
    run.env["PYTHONUNBUFFERED"] = "1"
    run.results["device"] = device_info(run)
    run.log(f"device: {run.results['device']}")
    install_wheels(run, site)
    sys.path[:0] = [str(site), str(ROOT)]
    from bench.gpu.models import SHAPES, model_bytes

    need = sum(model_bytes(SHAPES[s], "q8_0") for s in shapes) / 2**30
    folder = model_folder(run, need)
    writer = start_models(run, shapes, folder)
    if args.skip_build:
        run.log("build skipped (--skip-build): the installed llama-cpp-python")
        built = True
    else:
        built = run.can("build", MIN_S["build"]) and build_llama(
            run, site, args.cmake_extra.split()
        )
    t0 = time.monotonic()
    writer.wait()
    run.phases["models"] = {"exit": writer.returncode, "waited_s": round(time.monotonic() - t0, 1)}
    if not built:
        run.log("llama-cpp-python was not built: no model can run (see build.log.xz)")
    elif writer.returncode != 0:
        run.log("the models were not written (see run.log)")
    else:
        replay(run, folder / f"{shapes[-1]}.gguf")
        for shape in shapes:
            quality(run, shape, folder / f"{shape}.gguf", n)
        lat_shape = "tiny" if args.cpu_smoke else "1.5b"
        if lat_shape in shapes:
            latency(run, folder / f"{lat_shape}.gguf")
    text = summary(run, shapes)
    (out / "summary.md").write_text(text)
    run.results["phases"] = run.phases
    (out / "results.json").write_text(json.dumps(run.results, indent=1, ensure_ascii=False))
    plot(run, shapes)
    if not args.cpu_smoke:
        shutil.rmtree(folder, ignore_errors=True)
    print(text)
    return 0 if built else 1


if __name__ == "__main__":
    sys.exit(main())
