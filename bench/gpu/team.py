"""Issue 33 on the GPU machine in one command: a team's editors against one CUDA llama-server.

Usage (on the device, from the repository's root, ``.gpu_payload`` carried)::

    bash bench/gpu/team.sh [--out DIR] [--budget-s 530] [--seconds 15] [--cpu-smoke]

Each phase is timed and skipped, with a message, when what is left of ``--budget-s``
would not hold it; the runs go in order of what the issue needs most:

1. ``llama-server`` built with CUDA for sm_90 (``bench/gpu/build_llama_server.sh``, from
   the payload's ``llama-server-src-*.tar.xz``) while ``bench.gpu.models`` writes the
   random-weight 1.5B and 7B shapes of Qwen2.5-Coder (Q8_0, real vocabulary) to
   ``/dev/shm``;
2. ``bench.team_load`` at the 1.5B shape: 1, 4, 16 and 64 editors (real fimlsp processes),
   then the fault level (16 editors, a 2 MB file, the server restarted);
3. the same model through the OpenAI-compatible API (``serverApi: "openai"``), 16 editors;
4. the 7B shape at 16 and 64 editors (1 too, when the time allows);
5. ``bench.gpu.team_report``: ``summary.md`` and ``latency.png`` (or ``.svg``).

Into ``--out`` (default ``$OUT``): ``team-1.5b.json``, ``team-1.5b-openai.json``,
``team-7b.json``, ``summary.md``, the plot, ``team.log`` (every step's output and the
phases' times) and, when the build failed, ``build.log.xz``: at most 8 files, as the
device returns them.  The server runs all layers on the GPU with flash attention and a
slot per editor (``--parallel`` 64 of 4096 tokens, halved until it starts).

``--cpu-smoke`` runs the same steps here: the cached CPU build, the tiny test model, two
editors for a few seconds: the check that the command works before device time is spent.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: The GPU server's arguments: every layer on the GPU, flash attention.
GPU_SERVER_ARGS = "--n-gpu-layers 999 --flash-attn on"
#: Seconds a team_load run costs beyond its levels: the server's start, and each editor's
#: (a fimlsp process, its imports and its first questions to the server).
STARTUP_S, STARTUP_PER_EDITOR_S = 15.0, 0.5
#: Seconds a level costs beyond its typing time.
LEVEL_S = 12.0
#: Seconds kept for the report at the end.
RESERVE_S = 15.0


class Phases:
    """The run's clock, its log (``team.log``) and each phase's time and outcome."""

    def __init__(self, out: Path, budget_s: float) -> None:
        self.out, self.budget_s = out, budget_s
        self.started = time.monotonic()
        self.times: dict[str, dict[str, Any]] = {}
        self.log_path = out / "team.log"

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.started) - RESERVE_S

    def log(self, line: str) -> None:
        stamp = f"[{time.monotonic() - self.started:6.1f}s]"
        print(f"{stamp} {line}", flush=True)
        with self.log_path.open("a") as f:
            f.write(f"{stamp} {line}\n")

    def fits(self, phase: str, need: float) -> bool:
        if self.left() >= need:
            return True
        self.log(f"SKIPPED {phase}: {self.left():.0f} s left of the budget, it needs {need:.0f} s")
        self.times[phase] = {"note": f"skipped: {self.left():.0f} s left, needs {need:.0f} s"}
        return False

    def run(self, phase: str, cmd: Sequence[str], timeout: float) -> tuple[int, str]:
        """``cmd`` in its own process group (all of it stopped at ``timeout``); its exit
        code and the last line it printed; its output goes to team.log."""
        self.log(f"{phase}: $ {' '.join(cmd)}")
        t0 = time.monotonic()
        with self.log_path.open("a") as log:
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
            )
            try:
                stdout, _ = proc.communicate(timeout=max(1.0, timeout))
                code = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, _ = proc.communicate()
                code = -9
                self.log(f"{phase}: stopped at its limit of {timeout:.0f} s")
            log.write(stdout)
        seconds = time.monotonic() - t0
        self.times[phase] = {"seconds": round(seconds, 1), "exit": code}
        self.log(f"{phase}: exit {code} in {seconds:.1f} s")
        lines = stdout.strip().splitlines()
        return code, lines[-1] if lines else ""


def gpu_name() -> str:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "no GPU"
    return done.stdout.strip() or "no GPU"


def model_folder(need_gib: float) -> Path:
    """/dev/shm when it has room (the models are read back at every server start)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free / 2**30 > need_gib + 8:
        return shm / "fimlsp-team-models"
    return Path("/tmp/fimlsp-team-models")


def start_models(shapes: Sequence[str], folder: Path, log: Path) -> subprocess.Popen[bytes]:
    """``bench.gpu.models`` for each shape, one after the other, in the background."""
    folder.mkdir(parents=True, exist_ok=True)
    steps = [
        f"{sys.executable} -m bench.gpu.models --shape {s} --out {folder}/{s}.gguf" for s in shapes
    ]
    with log.open("a") as f:
        return subprocess.Popen(
            ["bash", "-c", " && ".join(steps)], cwd=ROOT, stdout=f, stderr=f, start_new_session=True
        )


def team_load(
    ph: Phases,
    phase: str,
    model: Path,
    binary: str,
    out: Path,
    editors: str,
    seconds: float,
    extra: Sequence[str],
    server_args: str,
) -> None:
    """One ``bench.team_load`` run, given the time it should take (at most what is left:
    then it skips its own last levels)."""
    levels = [n for n in editors.split(",") if n]
    faults = "--faults" in extra
    startup = STARTUP_S + STARTUP_PER_EDITOR_S * max(int(n) for n in levels)
    if not ph.fits(phase, startup + seconds + LEVEL_S):
        return
    warm = float(extra[extra.index("--warmup-s") + 1]) if "--warmup-s" in extra else 0.0
    fault_s = float(extra[extra.index("--fault-seconds") + 1]) if faults else 0.0
    need = (
        startup
        + len(levels) * (seconds + LEVEL_S)
        + (warm + LEVEL_S if warm else 0.0)
        + (fault_s + LEVEL_S if faults else 0.0)
        + 20.0
    )
    budget = min(ph.left(), need)
    cmd = [
        sys.executable,
        "-m",
        "bench.team_load",
        "--model",
        str(model),
        "--llama-server",
        binary,
        "--editors",
        ",".join(levels),
        "--seconds",
        str(seconds),
        "--threads",
        "4",
        "--server-args",
        server_args,
        "--budget-s",
        f"{budget:.0f}",
        "--out",
        str(out),
        *extra,
    ]
    ph.run(phase, cmd, timeout=budget + 30)
    ph.times[phase]["levels"] = levels + (["faults"] if faults else [])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu.team")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "team-out")))
    p.add_argument("--budget-s", type=float, default=530.0)
    p.add_argument("--seconds", type=float, default=15.0, help="typing time per level")
    p.add_argument("--fault-seconds", type=float, default=30.0)
    p.add_argument("--cpu-smoke", action="store_true")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    ph = Phases(args.out, args.budget_s)
    smoke = args.cpu_smoke
    ph.log(f"GPU: {gpu_name()}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")

    # 1. the server's build, and the models meanwhile
    big, small = ("7b", "1.5b") if not smoke else ("tiny", "tiny")
    folder = model_folder(12.0)
    models = None if smoke else start_models([small, big], folder, ph.log_path)
    build = (
        ["bash", "bench/gpu/build_llama_server.sh"]
        if not smoke
        else [sys.executable, "-m", "bench.llama_server", "--print-path"]
    )
    code, binary = ph.run("build", build, timeout=ph.left() - (STARTUP_S + 2 * args.seconds))
    if code != 0 or not Path(binary).is_file():
        logs = sorted(
            Path(os.environ.get("FIMLSP_CACHE_DIR", Path.home() / ".cache/fimlsp")).glob(
                "llama-server/*/build.log"
            )
        )
        if logs:
            (args.out / "build.log.xz").write_bytes(lzma.compress(logs[-1].read_bytes()))
        ph.log("the build failed: nothing to measure (build.log.xz)")
        return finish(ph, args.out, [], smoke)
    if models is not None:
        t0 = time.monotonic()
        try:
            models.wait(timeout=max(1.0, ph.left() - STARTUP_S))
        except subprocess.TimeoutExpired:
            os.killpg(models.pid, signal.SIGKILL)
        ph.times["models"] = {
            "seconds": round(time.monotonic() - t0, 1),
            "note": f"waited after the build; exit {models.returncode}",
        }
    model_small = folder / f"{small}.gguf" if not smoke else Path("tiny")
    model_big = folder / f"{big}.gguf" if not smoke else Path("tiny")
    server_args = "" if smoke else GPU_SERVER_ARGS
    s, fs = (4.0, 14.0) if smoke else (args.seconds, args.fault_seconds)
    warm = ["--warmup-s", "2" if smoke else "8"]
    outs = []

    # 2. the 1.5B shape: every level, then the faults
    levels = "1,2" if smoke else "1,4,16,64"
    out = args.out / f"team-{small}.json"
    fault_args = [
        *warm,
        "--faults",
        "--fault-editors",
        "2" if smoke else "16",
        "--fault-seconds",
        str(fs),
        *(["--big-file-bytes", "100000"] if smoke else []),
    ]
    if model_small.is_file() or smoke:
        team_load(ph, f"team-{small}", model_small, binary, out, levels, s, fault_args, server_args)
        outs.append(out)
    else:
        ph.log(f"no model {model_small}: bench.gpu.models failed (see above)")

    # 3. the OpenAI-compatible API
    out = args.out / f"team-{small}-openai.json"
    if model_small.is_file() or smoke:
        team_load(
            ph,
            f"team-{small}-openai",
            model_small,
            binary,
            out,
            "2" if smoke else "16",
            s,
            ["--server-api", "openai", *warm],
            server_args,
        )
        outs.append(out)

    # 4. the 7B shape
    out = args.out / f"team-{big}.json"
    if not smoke and model_big.is_file():
        levels = "16,64" if ph.left() < STARTUP_S + 3 * (s + LEVEL_S) + 60 else "1,16,64"
        team_load(ph, f"team-{big}", model_big, binary, out, levels, s, warm, server_args)
        outs.append(out)
    return finish(ph, args.out, [o for o in outs if o.is_file()], smoke)


def finish(ph: Phases, out: Path, runs: Sequence[Path], smoke: bool) -> int:
    """The report (summary.md and the plot) from whatever runs wrote their JSON."""
    phases = out / "phases.json.tmp"
    phases.write_text(json.dumps(ph.times))
    title = f"A team's editors against one llama-server: {gpu_name()}" + (
        " (CPU smoke run)" if smoke else ""
    )
    if runs:
        cmd = [
            sys.executable,
            "-m",
            "bench.gpu.team_report",
            *map(str, runs),
            "--out",
            str(out),
            "--phases",
            str(phases),
            "--title",
            title,
        ]
        subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, timeout=60)
    else:
        (out / "summary.md").write_text(f"# {title}\n\nNothing was measured: see team.log.\n")
    phases.unlink()
    ph.log(f"phases: {json.dumps(ph.times)}")
    ph.log(
        f"done in {time.monotonic() - ph.started:.0f} s; {out}: "
        f"{', '.join(sorted(p.name for p in out.iterdir()))}"
    )
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
