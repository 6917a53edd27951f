"""The decoding benchmark's cuts through a shared inference server, against the same model
in process; and several editors against one server.

Usage::

    python -m bench.remote [PATHS...] [--model tiny|SPEC] [--cuts boundary|randspan|both]
        [--n N] [--seed S] [--max-tokens N] [--top-k K] [--no-token-healing]
        [--wide-probs N] [--server-api llama.cpp|openai] [--editors 1,2,4]
        [--editor-cuts N] [--json]

llama.cpp's own ``llama-server`` (built once from the sources llama-cpp-python vendors:
``bench.llama_server``) serves the model on 127.0.0.1 with one thread and four slots,
without flash attention, as the in-process backend runs it, so greedy decoding gives the
same tokens both ways.  The cuts, modes and oracle are ``bench.fim_quality``'s; every cut
is completed in each mode twice: in process (``local``) and through the server
(``remote``, :mod:`lsp_server.model.remote`).  Per mode: successes (the oracle's verdicts;
equal for greedy decoding), ``claimed_success_but_invalid`` (0), how many middles are the
same both ways, and for the remote run the requests per completion (streams and probes),
the round trips that rejected tokens caused, tokens per second, latency p50/p95 and the
wall-time ratio remote / local.

Then 1, 2 and 4 editors (``--editors``: separate processes, each with its own connection,
as fimlsp processes are) complete the first ``--editor-cuts`` cuts at once against the
one server, each starting at a different cut; per count: latency p50/p95, how many
middles equal the single-editor run's, and claims the oracle rejects.

``--model tiny`` (the default) is a tiny random-weight model on StarCoder's vocabulary,
built once into the cache; ``--model default`` the embedded Gemma 3 270M; or a GGUF path.
The closing line estimates what a user on a LAN adds per completion: each request costs
at least one round trip (streamed tokens arrive pipelined).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from bench.fim_quality import (
    CaseResult,
    CaseRunner,
    Config,
    Report,
    Run,
    SetupError,
    add_decoding_arguments,
    corpus_files,
    decode_options,
    run_cuts,
)
from bench.grammar_coverage import Oracle, OracleFailure, add_corpus_arguments
from bench.harness import rounded_percentile
from bench.llama_server import (
    BuildFailed,
    BuildUnavailable,
    build_llama_server,
    running_llama_server,
)
from bench.quotient_check import CUT_KINDS, Corpus, Cut, make_cuts
from lexer.version import TargetVersion
from lsp_server.decoding import DecodeOptions, generate
from lsp_server.model import Backend, FimModel, ModelError, resolve_model
from lsp_server.model.remote import DEFAULT_WIDE_PROBS, RemoteBackend, open_remote
from lsp_server.modes import MODES
from quotient_parser.quotient import QuotientBuilder

#: Slots of the server: the most editors measured.
SLOTS = 4
#: Round-trip times of the LAN estimate (ms): wired, Wi-Fi.
LAN_RTT_MS = (1.0, 5.0)


# --------------------------------------------------------------------------- remote runs


@dataclass(frozen=True)
class Trail:
    """The tokens one completion took: ids, log-probabilities, and each one's lead over the
    best other candidate (``inf`` where none was weighed: a restart's replayed tokens)."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    gaps: tuple[float, ...]


class TrailRunner(CaseRunner):
    """``CaseRunner`` that keeps each cut's completions' tokens, per mode (``trails``)."""

    def __init__(self, model: Backend, oracle: Oracle, cfg: Config) -> None:
        super().__init__(model, oracle, cfg)
        #: (cut, mode) -> the tokens of that completion
        self.trails: dict[tuple[Cut, str], Trail] = {}
        self._cut: Cut | None = None

    def run(self, cut: Cut, text: str) -> CaseResult:
        self._cut = cut
        return super().run(cut, text)

    def _complete(self, left: str, right: str, options: DecodeOptions) -> Run:
        completion = generate(self.model, left, right, options, target=self.cfg.target)
        assert self._cut is not None
        trail = Trail(
            tuple(completion.token_ids), tuple(completion.token_logprobs), tuple(completion.gaps)
        )
        self.trails.setdefault((self._cut, options.mode), trail)
        return Run.of(completion)


class RemoteCaseRunner(TrailRunner):
    """``TrailRunner`` against a :class:`RemoteBackend`, noting each completion's requests."""

    model: RemoteBackend

    def __init__(self, model: RemoteBackend, oracle: Oracle, cfg: Config) -> None:
        super().__init__(model, oracle, cfg)
        #: (cut, mode) -> the backend's counters spent on that completion
        self.traffic: dict[tuple[Cut, str], dict[str, int]] = {}

    def _complete(self, left: str, right: str, options: DecodeOptions) -> Run:
        before = self.model.counters.snapshot()
        run = super()._complete(left, right, options)
        after = self.model.counters.snapshot()
        assert self._cut is not None
        self.traffic.setdefault((self._cut, options.mode), {k: after[k] - before[k] for k in after})
        return run


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def remote_figures(
    local: list[CaseResult], remote: list[CaseResult], traffic: dict[tuple[Cut, str], Any]
) -> dict[str, dict[str, Any]]:
    """Per mode: what the remote run cost on top of the figures both runs share."""
    out: dict[str, dict[str, Any]] = {}
    pairs = [(a, b) for a, b in zip(local, remote) if a.error is None and b.error is None]
    for mode in MODES:
        runs = [(a.runs[mode], b.runs[mode], traffic.get((b.cut, mode), {})) for a, b in pairs]
        local_ms = sum(x.total_ms for x, _, _ in runs)
        remote_ms = sum(y.total_ms for _, y, _ in runs)
        requests = [t.get("requests", 0) for _, _, t in runs]
        out[mode] = {
            "completions": len(runs),
            "same_middle": sum(x.middle == y.middle for x, y, _ in runs),
            "same_success": sum(x.success == y.success for x, y, _ in runs),
            "requests_per_completion": _mean(requests),
            "requests_max": max(requests, default=0),
            "rejected_round_trips_per_completion": _mean([t.get("rejected", 0) for *_, t in runs]),
            "probes_per_completion": _mean([t.get("probes", 0) for *_, t in runs]),
            "wide_probes": sum(t.get("wide", 0) for *_, t in runs),
            "held_back_probes": sum(t.get("held_back", 0) for *_, t in runs),
            "refills": sum(t.get("refills", 0) for *_, t in runs),
            "latency_ms_p50": rounded_percentile([y.total_ms for _, y, _ in runs], 50),
            "latency_ms_p95": rounded_percentile([y.total_ms for _, y, _ in runs], 95),
            "local_latency_ms_p50": rounded_percentile([x.total_ms for x, _, _ in runs], 50),
            "local_latency_ms_p95": rounded_percentile([x.total_ms for x, _, _ in runs], 95),
            "wall_ratio_remote_over_local": round(remote_ms / local_ms, 3) if local_ms else None,
        }
    return out


def _finite(value: float) -> float | None:
    return round(value, 4) if math.isfinite(value) else None


def divergence(local: Trail, remote: Trail, vocab: Sequence[bytes]) -> dict[str, Any]:
    """Where two completions' tokens part: the tokens in common, the largest difference of
    their log-probabilities there (the two engines' numerical noise), and the first step
    that differs with each side's token, log-probability and lead over its runner-up (a
    lead near 0 is a near tie that noise can flip)."""
    common = 0
    for a, b in zip(local.ids, remote.ids):
        if a != b:
            break
        common += 1
    deltas = [abs(a - b) for a, b in zip(local.logprobs[:common], remote.logprobs[:common])]
    finite = [d for d in deltas if math.isfinite(d)]
    out: dict[str, Any] = {
        "common_tokens": common,
        "tokens": {"local": len(local.ids), "remote": len(remote.ids)},
        "max_logprob_delta_before": round(max(finite, default=0.0), 4),
    }

    def side(trail: Trail) -> dict[str, Any] | None:
        if common >= len(trail.ids):
            return None
        token = trail.ids[common]
        return {
            "token": token,
            "text": vocab[token].decode("utf-8", "replace") if 0 <= token < len(vocab) else "",
            "logprob": _finite(trail.logprobs[common]),
            "lead": _finite(trail.gaps[common]) if common < len(trail.gaps) else None,
        }

    out["step"] = common
    out["local"], out["remote"] = side(local), side(remote)
    return out


#: What a difference shows of each side's completion.
_OUTCOME = ("middle", "stop_reason", "tokens", "success")


def differences(
    local: list[CaseResult],
    remote: list[CaseResult],
    trails: tuple[dict[tuple[Cut, str], Trail], dict[tuple[Cut, str], Trail]],
    vocab: Sequence[bytes],
) -> dict[str, list[dict[str, Any]]]:
    """Per mode, every cut whose middles differ: both outcomes and where the tokens part."""
    out: dict[str, list[dict[str, Any]]] = {}
    pairs = [(a, b) for a, b in zip(local, remote) if a.error is None and b.error is None]
    for mode in MODES:
        rows = []
        for a, b in pairs:
            x, y = a.runs[mode], b.runs[mode]
            if x.middle == y.middle:
                continue
            row: dict[str, Any] = {
                "cut": f"{a.cut.file}:{a.where}",
                "kind": a.cut.kind,
                "local": {k: getattr(x, k) for k in _OUTCOME},
                "remote": {k: getattr(y, k) for k in _OUTCOME},
            }
            t_local, t_remote = trails[0].get((a.cut, mode)), trails[1].get((b.cut, mode))
            if t_local is not None and t_remote is not None:
                row["divergence"] = divergence(t_local, t_remote, vocab)
            rows.append(row)
        out[mode] = rows
    return out


# --------------------------------------------------------------------------- many editors


@dataclass(frozen=True)
class EditorJob:
    """What one editor process completes: cuts as (left, right), from ``first`` on."""

    url: str
    cuts: tuple[tuple[str, str], ...]
    first: int
    options: DecodeOptions
    target: TargetVersion
    n_ctx: int
    wide_probs: int
    server_api: str


def _editor(job: EditorJob, start: Any) -> list[tuple[int, str, bool | None, float]]:
    """One editor: connect, wait for the others, complete every cut once; (cut index,
    middle, complete, milliseconds) per completion."""
    backend = open_remote(
        job.url,
        n_ctx=job.n_ctx,
        wide_probs=job.wide_probs,
        server_api=job.server_api,  # type: ignore[arg-type]
    )
    QuotientBuilder(job.target)  # the grammar, loaded outside the timings
    start.wait()
    out = []
    with backend:
        n = len(job.cuts)
        for i in range(n):
            index = (job.first + i) % n
            left, right = job.cuts[index]
            t0 = time.perf_counter()
            result = generate(backend, left, right, job.options, target=job.target)
            out.append((index, result.middle, result.complete, (time.perf_counter() - t0) * 1e3))
    return out


def many_editors(
    counts: Sequence[int],
    base: EditorJob,
    alone: Sequence[tuple[str, bool | None]],
    oracle: Oracle,
) -> list[dict[str, Any]]:
    """Each count of editors against the one server at once; latency and correctness."""
    context = multiprocessing.get_context("spawn")  # llama.cpp and threads: no fork
    rows = []
    n = len(base.cuts)
    for editors in counts:
        with context.Manager() as manager:
            start = manager.Event()
            with context.Pool(editors) as pool:
                jobs = [replace(base, first=(e * n) // editors) for e in range(editors)]
                pending = [pool.apply_async(_editor, (job, start)) for job in jobs]
                time.sleep(1.0)  # let every editor connect and load its grammar
                started = time.perf_counter()
                start.set()
                results = [p.get(timeout=3600) for p in pending]
                wall = time.perf_counter() - started
        latencies = [ms for res in results for *_, ms in res]
        same = sum((m, c) == alone[i] for res in results for i, m, c, _ in res)
        claims = [(i, m) for res in results for i, m, c, _ in res if c is True]
        verdicts = oracle.check_many([base.cuts[i][0] + m + base.cuts[i][1] for i, m in claims])
        rows.append(
            {
                "editors": editors,
                "completions": len(latencies),
                "latency_ms_p50": rounded_percentile(latencies, 50),
                "latency_ms_p95": rounded_percentile(latencies, 95),
                "wall_s": round(wall, 2),
                "completions_per_s": round(len(latencies) / wall, 2) if wall else None,
                "same_as_one_editor": same,
                "claimed_success_but_invalid": sum(v.ok is not True for v in verdicts),
            }
        )
    return rows


# --------------------------------------------------------------------------- driver


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.remote",
        description="The decoding benchmark's cuts in process and through llama-server, and "
        "several editors against one server.",
    )
    add_corpus_arguments(p, target_help="Python version of the quotient")
    add_decoding_arguments(p)
    p.set_defaults(model="tiny", n=20, max_tokens=32)
    p.add_argument(
        "--wide-probs",
        type=int,
        default=DEFAULT_WIDE_PROBS,
        metavar="N",
        help="alternatives a probe asks for when the decoder looks beyond the top k "
        f"(token healing, unfinished characters; default {DEFAULT_WIDE_PROBS}; 0: the "
        "whole vocabulary, exact but slow)",
    )
    p.add_argument("--server-api", choices=["llama.cpp", "openai"], default="llama.cpp")
    p.add_argument("--ctx-size", type=int, default=2048, help="context per slot (2048)")
    p.add_argument(
        "--editors",
        default="1,2,4",
        help=f"editor counts against one server, at most {SLOTS} (default 1,2,4; '' none)",
    )
    p.add_argument(
        "--editor-cuts", type=int, default=20, metavar="N", help="cuts each editor completes"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def model_path(spec: str) -> Path:
    """``tiny``: the tiny random-weight StarCoder model (built once); else any model spec."""
    if spec == "tiny":
        from testmodels.tiny import tiny_model_cached

        return tiny_model_cached("starcoder")
    return resolve_model(spec)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "n/a"


def _parting(row: dict[str, Any]) -> str:
    """Where a differing pair of middles parts, in words."""
    div = row.get("divergence")
    if div is None:
        return "(no tokens recorded)"

    def side(name: str) -> str:
        s = div[name]
        if s is None:
            return f"{name} stops ({row[name]['stop_reason']})"
        return f"{name} {s['text']!r} {s['logprob']} (lead {s['lead']})"

    return (
        f"step {div['step']}: {side('local')}, {side('remote')}; log-probabilities before "
        f"differ by at most {div['max_logprob_delta_before']}"
    )


def summary(d: dict[str, Any]) -> str:
    s = d["setup"]
    lines = [
        f"remote decoding: {s['model_file']} ({s['model_family']}) in process and on "
        f"llama-server ({s['server_api']} API, {s['slots']} slots, 1 thread); "
        f"{s['cases']} cuts, max {s['max_tokens']} tokens, top-k {s['top_k']}, token healing "
        f"{'on' if s['token_healing'] else 'off'}, wide probes {s['wide_probs']}; seed "
        f"{s['seed']}; {d['elapsed_s']} s",
        "",
        f"  {'mode':<14}{'success local/remote':>22}{'same middle':>13}{'requests':>10}"
        f"{'rejected':>10}{'probes':>8}{'tok/s l/r':>14}{'p50/p95 ms':>16}{'ratio':>7}",
    ]
    for mode in MODES:
        loc, rem, fig = d["local"][mode], d["remote"][mode], d["remote_cost"][mode]
        lines.append(
            f"  {mode:<14}{loc['success']:>10} / {rem['success']:<9}"
            f"{fig['same_middle']:>13}{fig['requests_per_completion']:>10}"
            f"{fig['rejected_round_trips_per_completion']:>10}{fig['probes_per_completion']:>8}"
            f"{loc['tokens_per_s']!s:>7}/{rem['tokens_per_s']!s:<6}"
            f"{fig['latency_ms_p50']!s:>8}/{fig['latency_ms_p95']!s:<7}"
            f"{fig['wall_ratio_remote_over_local']!s:>7}"
        )
        if loc["claimed_success_but_invalid"] or rem["claimed_success_but_invalid"]:
            lines.append(
                f"    claimed but invalid: local {loc['claimed_success_but_invalid']}, remote "
                f"{rem['claimed_success_but_invalid']}"
            )
    for mode, rows in d["differences"].items():
        for row in rows:
            lines.append(f"  {mode} differs at {row['cut']}: {_parting(row)}")
    if d["editors"]:
        lines += ["", "  editors against one server (constrained):"]
        for row in d["editors"]:
            lines.append(
                f"    {row['editors']} editor(s): {row['completions']} completions, latency p50 "
                f"{row['latency_ms_p50']} ms, p95 {row['latency_ms_p95']} ms, "
                f"{row['completions_per_s']} completions/s; same as one editor "
                f"{row['same_as_one_editor']}, claimed but invalid "
                f"{row['claimed_success_but_invalid']}"
            )
    lan = d["lan_estimate"]
    lines += [
        "",
        f"  on a LAN: {lan['requests_per_completion']} requests per constrained completion, so "
        + ", ".join(
            f"+{v} ms at {k.removeprefix('rtt_').removesuffix('_ms')} ms round trip"
            for k, v in lan["added_ms"].items()
        )
        + " on top of the server's own time",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace, out: IO[str]) -> int:
    t0 = time.monotonic()
    files, corpus_name = corpus_files(args)
    try:
        oracle = Oracle(shutil.which(args.oracle) or args.oracle)
    except (OSError, OracleFailure) as exc:
        raise SetupError(f"cannot start oracle {args.oracle!r}: {exc}") from exc
    with oracle:
        target = TargetVersion.parse(args.target or oracle.version[:2])
        options = decode_options(args)
        cfg = Config(options, target, heal_compare=args.heal_compare)
        corpus = Corpus(files, oracle)
        kinds = CUT_KINDS if args.cuts == "both" else (args.cuts,)
        cuts = [cut for kind in kinds for cut in make_cuts(corpus, kind, args.n, args.seed)]
        QuotientBuilder(target)  # load the grammar outside the timings
        try:
            path = model_path(args.model)
            binary = build_llama_server()
        except (ModelError, BuildUnavailable, BuildFailed) as exc:
            raise SetupError(str(exc)) from exc
        progress = not args.no_progress and sys.stderr.isatty()
        with FimModel(path, n_ctx=args.ctx_size, n_threads=1, n_gpu_layers=0) as local_model:
            local_runner = TrailRunner(local_model, oracle, cfg)
            local = run_cuts(cuts, corpus, local_runner, progress=progress)
            family, has_fim = local_model.layout.family, local_model.has_fim
            vocab = list(local_model.vocab_bytes)
        with running_llama_server(
            binary, path, parallel=SLOTS, ctx_size=args.ctx_size * SLOTS, threads=1
        ) as server:
            wide = args.wide_probs or 1 << 30
            backend = open_remote(
                server.url, n_ctx=args.ctx_size, wide_probs=wide, server_api=args.server_api
            )
            with backend:
                runner = RemoteCaseRunner(backend, oracle, cfg)
                remote = run_cuts(cuts, corpus, runner, progress=progress)
            counts = [int(c) for c in args.editors.split(",") if c.strip()]
            if any(not 1 <= c <= SLOTS for c in counts):
                raise SetupError(f"--editors: counts from 1 to {SLOTS}")
            editor_cuts = [r for r in remote if r.error is None][: args.editor_cuts]
            texts = {r.cut: corpus.by_name(r.cut.file) for r in editor_cuts}
            pairs = tuple(
                (src.text[: r.cut.left_end], src.text[r.cut.middle_end :])
                for r in editor_cuts
                if (src := texts[r.cut]) is not None
            )
            alone = [
                (r.runs["constrained"].middle, r.runs["constrained"].complete) for r in editor_cuts
            ]
            job = EditorJob(server.url, pairs, 0, replace(options, mode="constrained"), target,
                            args.ctx_size, wide, args.server_api)  # fmt: skip
            editors = many_editors(counts, job, alone, oracle) if counts and pairs else []

    def report(results: list[CaseResult]) -> dict[str, Any]:
        return Report(
            model=args.model,
            model_file=path.name,
            model_family=family,
            has_fim=has_fim,
            target=target,
            oracle=oracle.python,
            oracle_version=oracle.version_string,
            corpus=corpus_name,
            kinds=tuple(kinds),
            n=args.n,
            seed=args.seed,
            options=options,
            heal_compare=args.heal_compare,
            results=results,
        ).to_dict()

    local_d, remote_d = report(local), report(remote)
    cost = remote_figures(local, remote, runner.traffic)
    differing = differences(local, remote, (local_runner.trails, runner.trails), vocab)
    requests = cost["constrained"]["requests_per_completion"] or 0.0
    d: dict[str, Any] = {
        "setup": {
            "model": args.model,
            "model_file": path.name,
            "model_family": family,
            "server_api": args.server_api,
            "slots": SLOTS,
            "ctx_size_per_slot": args.ctx_size,
            "cases": local_d["cases"],
            "max_tokens": options.max_tokens,
            "top_k": options.top_k,
            "token_healing": options.token_healing,
            "wide_probs": args.wide_probs,
            "seed": args.seed,
            "target": str(target),
            "corpus": corpus_name,
            "load_average_at_start": list(os.getloadavg()),
        },
        "local": {mode: local_d[mode] for mode in MODES},
        "remote": {mode: remote_d[mode] for mode in MODES},
        "remote_cost": cost,
        "differences": differing,
        "editors": editors,
        "lan_estimate": {
            "requests_per_completion": requests,
            "added_ms": {f"rtt_{rtt:g}_ms": round(requests * rtt, 1) for rtt in LAN_RTT_MS},
        },
        "errors": {"local": local_d["errors"], "remote": remote_d["errors"]},
        "elapsed_s": round(time.monotonic() - t0, 1),
    }
    if args.json:
        print(json.dumps(d, indent=1, ensure_ascii=False), file=out)
    else:
        print(summary(d), file=out)
    claims = [d[side]["constrained"]["claimed_success_but_invalid"] for side in ("local", "remote")]
    claims += [row["claimed_success_but_invalid"] for row in editors]
    sound = not any(claims)
    return 0 if sound else 1


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args, out or sys.stdout)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
