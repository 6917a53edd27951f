"""Where the server's memory goes during change-and-request storms.

Usage::

    python -m bench.memory_growth [--storms 20] [--changes 300] [--seed 0] [--model PATH]
        [--frames 12] [--plain] [--max-states N] [--json]

Starts the real server (served as ``fimlsp --stdio`` serves it) with one extra
request, ``bench/heap``, and runs storms of incremental changes with completion
requests and cancellations (``bench.lsp_fuzz``'s typing storm, each on a fresh
standard-library file, opened and closed).  After each storm, once every answer is
in, ``bench/heap`` reports, from the engine process (where the parser and the model
live, under ``tracemalloc``; ``EngineProxy.inspect``), the resident memory, what
``tracemalloc`` traces, the growth since the previous storm grouped by the allocating
line (with its caller), the sizes of every cache and table that could grow (the
Earley automata of the recognizers and of the backward parser, the engine's quotient
builders) and what ``malloc_trim`` gives back, which tells fragmentation from live
objects; and from the front, its resident memory (``frontRssMb``), pygls' future and
result maps, the documents and the captured requests.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import functools
import gc
import json
import sys
import tracemalloc
import types
from collections.abc import Sequence
from typing import IO, Any

from bench.lsp_fuzz import Fuzzer, Options, resolve_model


def _automaton_sizes(auto: Any) -> dict[str, int]:
    return {
        "states": len(auto.st_items),
        "goto": sum(len(d) for d in auto.st_goto),
        "goto_complete": sum(len(d) for d in auto.st_goto_complete),
        "union": len(auto._union),
        "union_many": len(auto._union_many),
        "fixpoint": len(auto._fixpoint),
    }


def _front_tables(server: Any) -> dict[str, Any]:
    """Every table of the front process that could grow without bound."""
    protocol = server.protocol
    in_flight = server.requests.counters()
    return {
        "pygls_request_futures": len(protocol._request_futures),
        "pygls_result_types": len(protocol._result_types),
        "captured": in_flight["capturedRequests"],
        "running": in_flight["runningRequests"],
        "documents": len(server.documents),
    }


def _tables(engine: Any) -> dict[str, Any]:
    """Every table of the engine process that could grow without bound."""
    from quotient_parser import heap, suffix
    from quotient_parser.earley import Automaton
    from quotient_parser.recognizer import Recognizer

    builders = engine.planner._builders  # the per-document quotient builders
    rights = [b._rights for b in builders.values()]
    tables: dict[str, Any] = {
        "builders": len(builders),
        "builder_right_contexts": sum(len(r) for r in rights),
        "builder_right_memo": sum(len(c.memo) for r in rights for c in r.values()),
        "builder_right_table": sum(len(c.table) for r in rights for c in r.values()),
        "recent_backward_parses": sum(len(keep) for keep in suffix._RECENT_PARSES),
    }
    everything = gc.get_objects()
    census: dict[str, int] = {}
    for obj in everything:
        kind = type(obj).__qualname__
        census[kind] = census.get(kind, 0) + 1
    # The types the collector tracks most objects of (what grows shows between storms).
    tables["census"] = dict(sorted(census.items(), key=lambda kv: -kv[1])[:40])
    automata = [o for o in everything if isinstance(o, Automaton)]
    del everything
    forward = {id(r.automaton): str(v) for v, r in Recognizer._cache.items()}
    backward = {id(found[0]): str(v) for v, found in suffix._REVERSED.items()}
    retired = [a for a in automata if id(a) not in forward and id(a) not in backward]
    for auto in automata:
        name = forward.get(id(auto))
        if name:
            tables[f"automaton_{name}"] = _automaton_sizes(auto)
        elif id(auto) in backward:  # the backward parser (``suffix``)
            tables[f"reversed_automaton_{backward[id(auto)]}"] = _automaton_sizes(auto)
    # Generations no cache holds any more, still alive (held, or cyclic garbage not
    # yet collected).
    tables["retired_automata_alive"] = len(retired)
    tables["retired_automata_states"] = sum(a.n_states for a in retired)
    tables["heap_trims"] = heap.trims  # after retired generations were freed
    tables["heap_longest_trim_ms"] = round(heap.longest_trim_ms, 2)
    tables["heap_longest_take_apart_ms"] = round(heap.longest_take_apart_ms, 2)
    return tables


_MALLINFO_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t) for name in (*_MALLINFO_FIELDS, "uordblks", "fordblks", "keepcost")
    ]


@functools.cache
def _libc() -> Any:
    """glibc, loaded once (every ``ctypes.CDLL`` makes a class: cyclic garbage a call)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        libc.malloc_trim  # noqa: B018 - both or neither
    except (OSError, AttributeError):
        return None
    return libc


def _malloc_mb() -> dict[str, float] | None:
    """glibc's own account (``mallinfo2``): bytes in use, free but kept in its heaps
    (fragmentation a trim may return), and mapped directly; None without glibc."""
    libc = _libc()
    if libc is None:
        return None
    info = libc.mallinfo2()
    return {
        "inUseMb": round(info.uordblks / 2**20, 1),
        "freeMb": round(info.fordblks / 2**20, 1),
        "mappedMb": round(info.hblkhd / 2**20, 1),
    }


def _cyclic_garbage() -> dict[str, Any]:
    """Collect everything, keeping what the collector found
    (``DEBUG_SAVEALL``): the cyclic garbage that was waiting, counted by type (the
    project's own classes always, the rest the largest), its size (``sys.getsizeof``
    of each object, not what it holds outside the cycle), the functions whose frames
    were in it (exceptions kept with their tracebacks), the classes in it (made at run
    time), and the resident memory after."""
    own = ("quotient_parser", "lexer", "lsp_server", "bench")
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = gc.collect()
        by_type: dict[str, int] = {}
        frames: dict[str, int] = {}
        classes: dict[str, int] = {}
        size = 0
        for obj in gc.garbage:
            kind = type(obj)
            name = kind.__name__
            if kind.__module__.split(".")[0] in own:
                name = f"{kind.__module__}.{name}"
            by_type[name] = by_type.get(name, 0) + 1
            size += sys.getsizeof(obj)
            if isinstance(obj, type):  # classes made at run time, and by whom
                where = f"{obj.__module__}.{obj.__qualname__}"
                classes[where] = classes.get(where, 0) + 1
            elif isinstance(obj, types.FrameType):
                code = obj.f_code
                where = f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_name}"
                frames[where] = frames.get(where, 0) + 1
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
    gc.collect()  # what was saved is unreachable again: free it
    top = sorted(by_type.items(), key=lambda kv: -kv[1])
    shown = {k: v for i, (k, v) in enumerate(top) if i < 12 or k.split(".")[0] in own}
    return {
        "objects": found,
        "kb": round(size / 1024, 1),
        "byType": shown,
        "frames": frames,
        "classes": classes,
        "rssAfterMb": _rss_mb(),
    }


def _frame(frame: tracemalloc.Frame) -> str:
    name = frame.filename.rsplit("site-packages/", 1)[-1].rsplit("/hardening/", 1)[-1]
    return f"{name}:{frame.lineno}"


def _rss_mb() -> float:
    from lsp_server.rss import rss_mb as rss

    return round(rss(), 1)


#: What the engine process keeps between two ``bench/heap`` calls (the last snapshot).
_previous: list[tracemalloc.Snapshot] = []


def engine_heap(engine: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``bench/heap`` in the engine process (called through ``EngineProxy.inspect``);
    tracing starts at its first call (imports under ``tracemalloc`` take minutes, and
    only growth is of interest)."""
    from quotient_parser.recognizer import Recognizer

    # The engine's collector freezes survivors (lsp_server.collector), and frozen
    # objects are neither listed by gc.get_objects() nor collected: bring them back for
    # the census and the full collection (the collector freezes them again at its tick).
    gc.unfreeze()

    if params.get("maxStates") is not None:
        Recognizer.max_states = params["maxStates"]
    if params.get("plain"):  # resident memory and tables only: what a user's server does
        row: dict[str, Any] = {
            "rssMb": _rss_mb(),
            "rssAfterTrimMb": None,
            "tracedMb": None,
            "malloc": _malloc_mb(),
            "growth": [],
            "tables": _tables(engine),
        }
        if params.get("collect"):  # a diagnosis: what the collector had still to free
            row["cyclicGarbage"] = _cyclic_garbage()
        return row
    gc.collect()
    if not tracemalloc.is_tracing():
        tracemalloc.start(params["frames"])
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    snapshot = tracemalloc.take_snapshot().filter_traces(ignore)
    rss = _rss_mb()
    traced, _ = tracemalloc.get_traced_memory()
    top: list[dict[str, Any]] = []
    if _previous:
        for stat in snapshot.compare_to(_previous[-1], "traceback")[:12]:
            if stat.size_diff <= 0:
                continue
            where = [_frame(f) for f in reversed(stat.traceback[-4:])]  # innermost first
            top.append({"kb": round(stat.size_diff / 1024, 1), "count": stat.count_diff,
                        "where": where})  # fmt: skip
    _previous[:] = [snapshot]
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
    trimmed = _rss_mb() if libc is not None else rss
    return {
        "rssMb": rss,
        "rssAfterTrimMb": trimmed,
        "malloc": _malloc_mb(),
        "tracedMb": round(traced / 2**20, 2),
        # tracemalloc's own tables (its traceback table only grows): part of rssMb
        "tracemallocOwnMb": round(tracemalloc.get_tracemalloc_memory() / 2**20, 2),
        "growth": top,
        "tables": _tables(engine),
    }


def serve(frames: int, max_states: int | None = None) -> int:
    """The server with ``bench/heap``: the engine's heap (:func:`engine_heap`) and the
    front's tables and resident memory."""
    from lsp_server.server import create_server
    from lsp_server.transport.serving import serve_stdio

    server = create_server()

    @server.feature("bench/heap")
    async def heap(ls: Any, params: Any) -> dict[str, Any]:
        def option(name: str) -> bool:
            return bool(
                (isinstance(params, dict) and params.get(name)) or getattr(params, name, False)
            )

        asked = {"plain": option("plain"), "collect": option("collect"), "frames": frames,
                 "maxStates": max_states}  # fmt: skip
        row = await asyncio.wrap_future(ls.engine.inspect("bench.memory_growth:engine_heap", asked))
        row["tables"].update(_front_tables(ls))
        row["frontRssMb"] = _rss_mb()
        return dict(row)

    return serve_stdio(server)


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from bench.lsp_fuzz import typing_storm

    options = Options(
        seed=args.seed,
        classes=("storm",),
        server=(
            sys.executable,
            "-m",
            "bench.memory_growth",
            "--serve",
            "--frames",
            str(args.frames),
            *(("--max-states", str(args.max_states)) if args.max_states is not None else ()),
        ),
        storm_changes=args.changes,
        rotate_s=1e9,
    )
    fuzzer = Fuzzer(options, resolve_model(args.model))
    fuzzer.options.classes = ()  # no abuse before initialize: a plain session
    rows = []
    try:
        await fuzzer.start_life()
        for storm in range(args.storms + 1):
            if storm:  # storm 0: the baseline after start-up
                fuzzer.begin_case("storm", "typing_storm")
                await typing_storm(fuzzer, fuzzer.rng)
                await fuzzer.drain()
            record = await fuzzer.request(
                "bench/heap", {"plain": args.plain, "collect": args.collect}
            )
            await fuzzer.wait_for([record], HEAP_TIMEOUT_S, barrier=False)  # the engine answers
            row = record.result if isinstance(record.result, dict) else {}
            if record.answered_at is None or record.code:  # said, not a KeyError later
                row["unanswered" if record.answered_at is None else "errorCode"] = (
                    record.code or True
                )
            else:
                row["heapSeconds"] = round(record.answered_at - record.sent_at, 2)
            row["storm"] = storm
            rows.append(row)
            if args.progress:
                print(
                    f"storm {storm}: {row.get('rssMb')} MB resident, "
                    f"{row.get('tracedMb')} MB traced",
                    file=sys.stderr,
                )
    finally:
        if fuzzer.server is not None:
            await fuzzer.server.stop()
        fuzzer.oracle.shutdown(cancel_futures=True)
    return {
        "storms": args.storms,
        "changes": args.changes,
        "seed": args.seed,
        "maxStates": args.max_states,
        "plain": args.plain,
        "secondHalfGrowthMbPerStorm": growth_per_storm(rows),
        "rows": rows,
    }


#: Seconds ``bench/heap`` may take: under ``tracemalloc`` a snapshot and its comparison
#: with the last one walk every traced block (tens of seconds late in a long run).
HEAP_TIMEOUT_S = 600.0


def growth_per_storm(rows: Sequence[dict[str, Any]]) -> float | None:
    """Resident memory's growth a storm over the second half of the storms (MB, the
    least-squares slope): zero within noise once every bound is reached."""
    half = [r for r in rows if r["storm"] >= rows[-1]["storm"] / 2 and r.get("rssMb")]
    if len(half) < 2:
        return None
    storms = [float(r["storm"]) for r in half]
    rss = [float(r["rssMb"]) for r in half]
    mean_storm, mean_rss = sum(storms) / len(storms), sum(rss) / len(rss)
    spread = sum((s - mean_storm) ** 2 for s in storms)
    slope = sum((s - mean_storm) * (m - mean_rss) for s, m in zip(storms, rss)) / spread
    return round(slope, 3)


def automaton_growth(files: int) -> list[dict[str, Any]]:
    """The forward automaton of this interpreter's version as standard-library files are
    fed through one recognizer (64 characters a step): states, memo sizes, traced MB."""
    import random

    from bench.corpus import stdlib_corpus
    from quotient_parser.recognizer import Recognizer

    recognizer = Recognizer((sys.version_info.major, sys.version_info.minor))
    auto = recognizer.automaton
    paths = [
        f.path
        for f in stdlib_corpus()
        if 2_000 < f.path.stat().st_size < 40_000 and "test" not in f.name.split("/")[0]
    ]
    random.Random(0).shuffle(paths)
    recognizer.initial().feed("x = 1\n")
    gc.collect()
    tracemalloc.start()
    base, rows = tracemalloc.get_traced_memory()[0], []
    marks = {n for n in (25, 50, 100, 200, 400, 800, 1600) if n <= files} | {files}
    for count, path in enumerate(paths[:files], 1):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        state = recognizer.initial()
        for at in range(0, len(text), 64):
            state = state.feed(text[at : at + 64])
        del state
        if count in marks:
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0] - base
            rows.append(
                {"files": count, **_automaton_sizes(auto), "tracedMb": round(traced / 2**20, 1)}
            )
    tracemalloc.stop()
    return rows


def _stdlib_texts(seed: int) -> list[str]:
    """The standard library's files of 2 KB to 200 KB, shuffled."""
    import random

    from bench.corpus import stdlib_corpus

    paths = [f.path for f in stdlib_corpus() if 2_000 < f.path.stat().st_size < 200_000]
    random.Random(seed).shuffle(paths)
    texts = []
    for path in paths:
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return texts


def retirement_gaps(states: int, rounds: int, seed: int) -> dict[str, Any]:
    """What retiring a generation of ``states`` states (or as many as the standard
    library gives) costs the event loop: the longest gap of a 1 ms ticker on the main
    thread (``bench.event_loop_costs``) while a worker thread retires it, drops its last
    reference (reference counting frees it there) and asks again (it is taken apart and
    the heap trimmed there), against the gap of a full collection (``gc.collect()``,
    what freed retired generations before) with such a generation alive."""
    import weakref

    from bench.event_loop_costs import longest_gap
    from quotient_parser import heap
    from quotient_parser.recognizer import Recognizer

    version = (sys.version_info.major, sys.version_info.minor)
    texts = iter(_stdlib_texts(seed))
    rows = []
    for _ in range(rounds):
        Recognizer.max_states = -1  # a fresh generation, grown to the size asked for
        grown = [Recognizer(version)]
        Recognizer.max_states = states
        for text in texts:  # until the size asked for, or the corpus runs out
            if grown[0].automaton.n_states >= states:
                break
            grown[0].initial().feed(text)
        size = grown[0].automaton.n_states
        Recognizer.max_states = size - 1  # past the bound, whatever the corpus gave
        rss_before = _rss_mb()
        collect_gap, collect_ms = longest_gap(gc.collect)
        trims, automaton = heap.trims, weakref.ref(grown[0].automaton)

        def retire(grown: list[Recognizer] = grown) -> None:
            if Recognizer(version) is not grown[0]:  # over the bound: retired
                grown.clear()  # the last reference: freed here
            Recognizer(version)  # the next ask trims the heap

        gap, took = longest_gap(retire)
        rows.append(
            {
                "states": size,
                "retired": not grown,
                "retireGapMs": round(gap, 2),
                "retireMs": round(took, 2),
                "freed": automaton() is None,
                "trimmed": heap.trims > trims,
                "rssBeforeMb": rss_before,
                "rssAfterMb": _rss_mb(),
                "fullCollectionGapMs": round(collect_gap, 2),
                "fullCollectionMs": round(collect_ms, 2),
            }
        )
    return {"states": states, "rounds": rounds, "seed": seed, "rows": rows}


def format_report(report: dict[str, Any]) -> str:
    rows = report["rows"]
    lines = [
        f"memory growth: {report['storms']} storms of {report['changes']} changes "
        f"(seed {report['seed']})",
        "storm  rss MB  after trim  traced MB  futures  automaton states  builders",
    ]
    for row in rows:
        tables = row.get("tables", {})
        if row.get("rssMb") is None:  # the server did not answer ``bench/heap`` in time
            lines.append(f"{row['storm']:5d}  no answer ({row})")
            continue
        states = sum(v["states"] for k, v in tables.items() if k.startswith("automaton_"))
        lines.append(
            f"{row['storm']:5d}  {row['rssMb']:6.1f}  {row['rssAfterTrimMb'] or 0.0:10.1f}  "
            f"{row['tracedMb'] or 0.0:9.2f}  {tables.get('pygls_request_futures', 0):7d}  "
            f"{states:16d}  {tables.get('builders', 0):8d}"
        )
    if len(rows) > 2:
        growth: dict[tuple[str, ...], float] = {}
        for row in rows[2:]:  # after the first storm, which warms every table
            for item in row.get("growth", []):
                key = tuple(item["where"][:3])
                growth[key] = growth.get(key, 0.0) + item["kb"]
        lines.append(f"largest traced growth over storms 2-{len(rows) - 1} (KB, by line):")
        for key, kb in sorted(growth.items(), key=lambda kv: -kv[1])[:10]:
            lines.append(f"  {kb:8.1f}  {' <- '.join(key)}")
        lines.append("tables at the end: " + json.dumps(rows[-1].get("tables", {})))
    lines.append(f"growth a storm over the second half: {report['secondHalfGrowthMbPerStorm']} MB")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory_growth", description=__doc__)
    p.add_argument("--storms", type=int, default=20)
    p.add_argument("--changes", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default=None, help="GGUF path (default: the tiny stopping model)")
    p.add_argument("--frames", type=int, default=12, help="traceback depth traced")
    p.add_argument(
        "--plain",
        action="store_true",
        help="no tracemalloc and no malloc_trim: resident memory as users see it",
    )
    p.add_argument(
        "--collect",
        action="store_true",
        help="with --plain, a diagnosis: after each storm, collect and report the cyclic "
        "garbage by type (changes what later storms start from)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument(
        "--automaton",
        type=int,
        metavar="FILES",
        default=0,
        help="instead: the automaton's growth over FILES standard-library files",
    )
    p.add_argument(
        "--max-states",
        type=int,
        default=None,
        help="the server's Recognizer.max_states (smaller: its plateau comes in fewer storms)",
    )
    p.add_argument(
        "--retirement",
        type=int,
        metavar="STATES",
        default=0,
        help="instead: the event loop's longest gap while a generation of STATES states "
        "is retired and freed, against a full collection's",
    )
    p.add_argument("--rounds", type=int, default=5, help="with --retirement: generations")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        return serve(args.frames, args.max_states)
    if args.retirement:
        report = retirement_gaps(args.retirement, args.rounds, args.seed)
        print(
            json.dumps(report, indent=1)
            if args.json
            else "\n".join(json.dumps(row) for row in report["rows"]),
            file=out or sys.stdout,
        )
        return 0
    if args.automaton:
        rows = automaton_growth(args.automaton)
        print(
            json.dumps(rows, indent=1)
            if args.json
            else "\n".join(
                f"{r['files']:5d} files: {r['states']:6d} states, {r['union']:6d} unions, "
                f"{r['fixpoint']:6d} fixpoints, {r['tracedMb']:6.1f} MB traced"
                for r in rows
            ),
            file=out or sys.stdout,
        )
        return 0
    report = asyncio.run(measure(args))
    out = out or sys.stdout
    print(json.dumps(report, indent=1) if args.json else format_report(report), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
