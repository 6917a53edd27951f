"""The token index against a trie and against today's vocabulary scan, by vocabulary size.

Usage::

    python -m bench.token_index [--families starcoder2 qwen2.5-coder gemma] [--n N]
        [--seed S] [--repeat R] [--json]

For each family's tiny test model (49,152, 151,936 and 262,144 tokens by default), with
the token bytes as llama.cpp renders them:

``build``      building ``lsp_server.model.token_index.TokenIndex`` (sorting the token
               bytes), loading it from the disk cache, and building the alternative, a
               trie in flat arrays (``FlatTrie`` below), from the same sort (``--repeat``
               times each);
``queries``    per query, microseconds for the index and for the trie: ``owing`` (token
               healing: the tokens that start with the owed bytes or are a piece of them;
               the owed bytes are ``--n`` random word-pieces of the vocabulary, what
               healing takes out of a prompt) and ``continuing`` (the tokens that can
               finish a held-back partial UTF-8 character, for every lead of a sample of
               non-ASCII text);
``step``       per decoding step while healing owes text: microseconds to find the first
               acceptable candidate in the model's order, today (rank the whole vocabulary
               with the decoder's own ranker, then ``decoding.text.token_text`` on each
               token in order until one fits) and with the index (rank only its
               candidates), on the model's real logits after a prompt; and the per-step
               numpy passes over the whole logit vector that remain (top-k
               ``argpartition``, the log-softmax of ``LogitsRanking``).

Medians and p90s of one run; ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from functools import partial
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from bench.grammar_coverage import percentile
from lsp_server.decoding import DecodeOptions
from lsp_server.decoding.ranking import Ranker
from lsp_server.decoding.text import token_text
from lsp_server.model import FimModel, LogitsRanking
from lsp_server.model.token_index import TokenIndex
from testmodels.tiny import tiny_model_cached

IntArray = npt.NDArray[np.int32]

DEFAULT_FAMILIES = ("starcoder2", "qwen2.5-coder", "gemma")
NON_ASCII = "é€🐍日本語ü—“”✓ñ中文한국어Ωλ∑→"


class FlatTrie:
    """A trie over the token bytes in flat arrays (lists where Python reads them one item
    at a time), nodes numbered in preorder, which is byte order: a node's subtree holds a
    contiguous run of the sorted tokens.

    Children of a node are a CSR list (``child_start``, ``child_byte``, ``child_node``);
    ``token_lo``/``token_hi`` give a node's run of sorted tokens (its subtree) and
    ``end_hi`` where the tokens that end exactly at it stop.
    """

    def __init__(self, sorted_bytes: Sequence[bytes], sorted_ids: IntArray) -> None:
        self.ids = sorted_ids
        depth = [0]
        byte = [-1]
        parent = [-1]
        token_lo = [0]
        end_hi = [0]
        path = [0]  # node of each depth along the current string
        previous = b""
        for pos, data in enumerate(sorted_bytes):
            common = 0
            limit = min(len(previous), len(data))
            while common < limit and previous[common] == data[common]:
                common += 1
            del path[common + 1 :]
            for d in range(common, len(data)):
                node = len(depth)
                depth.append(d + 1)
                byte.append(data[d])
                parent.append(path[-1])
                token_lo.append(pos)
                end_hi.append(pos)
                path.append(node)
            end_hi[path[-1]] = pos + 1
            previous = data
        n_nodes = len(depth)
        self.token_lo = np.array(token_lo, dtype=np.int64)
        self.end_hi = np.array(end_hi, dtype=np.int64)
        # subtree end in sorted tokens: the next node at the same or a lower depth
        self.token_hi = np.full(n_nodes, len(sorted_bytes), dtype=np.int64)
        stack: list[int] = []
        for node in range(n_nodes):
            while stack and depth[stack[-1]] >= depth[node]:
                self.token_hi[stack.pop()] = token_lo[node]
            stack.append(node)
        counts = np.bincount(np.array(parent[1:], dtype=np.int64), minlength=n_nodes)
        self.child_start: list[int] = [0, *np.cumsum(counts).tolist()]
        # children grouped by parent, each group in preorder, which is byte order
        self.child_node: list[int] = (np.argsort(np.array(parent[1:]), kind="stable") + 1).tolist()
        self.child_byte: list[int] = [byte[n] for n in self.child_node]

    def _child(self, node: int, value: int) -> int:
        lo, hi = self.child_start[node], self.child_start[node + 1]
        at = bisect_left(self.child_byte, value, lo, hi)
        if at < hi and self.child_byte[at] == value:
            return int(self.child_node[at])
        return -1

    def owing(self, owed: bytes) -> IntArray:
        """Tokens that start with ``owed`` or are a non-empty proper prefix of it."""
        parts: list[tuple[int, int]] = []
        node = 0
        for depth, value in enumerate(owed):
            node = self._child(node, value)
            if node < 0:
                break
            if depth < len(owed) - 1 and self.end_hi[node] > self.token_lo[node]:
                parts.append((int(self.token_lo[node]), int(self.end_hi[node])))
        else:
            parts.append((int(self.token_lo[node]), int(self.token_hi[node])))
        if not parts:
            return self.ids[:0]
        return np.concatenate([self.ids[lo:hi] for lo, hi in parts])


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - t0) * 1e6


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {"median": percentile(values, 50), "p90": percentile(values, 90)}


def _word_pieces(vocab: Sequence[bytes], n: int, rng: random.Random) -> list[bytes]:
    """Random word-pieces (what token healing takes out of a prompt)."""
    words = [b for b in vocab if b.strip() and b.strip().replace(b"_", b"").isalnum()]
    return [rng.choice(words) for _ in range(n)]


def _held_bytes() -> list[bytes]:
    out = []
    for char in NON_ASCII:
        data = char.encode()
        out += [data[:k] for k in range(1, len(data))]
    return out


def bench_family(family: str, n: int, seed: int, repeat: int) -> dict[str, Any]:
    path = tiny_model_cached(family=family, n_layer=1, n_embd=16)
    model = FimModel(path, n_ctx=256)
    vocab = model.vocab_bytes
    rng = random.Random(seed)

    builds = [_timed(partial(TokenIndex, vocab)) for _ in range(repeat)]
    index = builds[0][0]
    TokenIndex.cached(vocab)
    cached_us = [_timed(partial(TokenIndex.cached, vocab))[1] for _ in range(repeat)]
    sorted_bytes = [vocab[i] for i in index._ids.tolist()]
    tries = [_timed(partial(FlatTrie, sorted_bytes, index._ids)) for _ in range(repeat)]
    trie = tries[0][0]

    owed = _word_pieces(vocab, n, rng)
    held = _held_bytes()
    index_owing = [_timed(partial(index.owing, q))[1] for q in owed]
    trie_owing = [_timed(partial(trie.owing, q))[1] for q in owed]
    matches = [len(index.owing(q)) for q in owed]
    for q in owed[:50]:  # both give the same answer
        assert sorted(trie.owing(q).tolist()) == sorted(index.owing(q).tolist()), q
    index_cont = [_timed(partial(index.continuing, h))[1] for h in held]

    # one decoding step with owed text: today's full ranking and scan, and the index's
    logits = model.cache.evaluate(model.tokenize("import os\n\ndef main(argv):\n    return "))
    ranking = LogitsRanking(logits, model.eog_ids)
    ranker = Ranker(DecodeOptions())
    step_scan, step_index, scanned = [], [], []
    for q in owed[: max(1, n // 4)]:
        forced = q.decode("utf-8", errors="replace")

        def fits(token: int, forced: str = forced) -> bool:
            """What the decoder asks of a candidate while healing owes ``forced``."""
            return token_text(vocab[token], b"", forced, False) is not None

        def scan() -> int:
            # as the constrained loop: end tokens and empty tokens are no text to take
            for count, token in enumerate(ranker.order(ranking, len(vocab)), 1):
                tok = int(token)
                if model.eog(tok) or not vocab[tok]:
                    continue
                if fits(tok):
                    return count
            return len(vocab)

        def with_index(q: bytes = q) -> int:
            candidates = index.owing(q)
            ordered = candidates[np.argsort(-logits[candidates], kind="stable")]
            for count, token in enumerate(ordered.tolist(), 1):
                if fits(token):
                    return count
            return 0

        count, us = _timed(scan)
        scanned.append(count)
        step_scan.append(us)
        step_index.append(_timed(with_index)[1])
    top_k = [_timed(lambda: ranker.order(ranking, 50))[1] for _ in range(30)]
    # a fresh ranking computes the log-softmax over the whole vocabulary on first use
    softmax = [
        _timed(lambda: LogitsRanking(logits, model.eog_ids).logprob(0))[1] for _ in range(30)
    ]
    model.close()
    return {
        "family": family,
        "vocab_size": len(vocab),
        "build_ms": {
            "index": _stats([us / 1e3 for _, us in builds]),
            "index_from_cache": _stats([us / 1e3 for us in cached_us]),
            "trie": _stats([us / 1e3 for _, us in tries]),
        },
        "trie_nodes": len(trie.token_lo),
        "owing_us": {"index": _stats(index_owing), "trie": _stats(trie_owing)},
        "owing_matches": _stats(matches),
        "continuing_us": {"index": _stats(index_cont)},
        "step_us": {
            "scan_today": _stats(step_scan),
            "index": _stats(step_index),
            "tokens_scanned_today": _stats(scanned),
            "top_k_argpartition": _stats(top_k),
            "log_softmax": _stats(softmax),
        },
    }


def _print(results: Sequence[dict[str, Any]], out: IO[str]) -> None:
    def cell(stats: dict[str, float | None]) -> str:
        return f"{stats['median']:.1f} / {stats['p90']:.1f}"

    out.write("median / p90: microseconds (build: milliseconds)\n")
    for r in results:
        b, s = r["build_ms"], r["step_us"]
        out.write(f"\n{r['family']}: {r['vocab_size']} tokens\n")
        out.write(f"  build (ms): index {cell(b['index'])}, from cache "
                  f"{cell(b['index_from_cache'])}, trie {cell(b['trie'])} "
                  f"({r['trie_nodes']} nodes)\n")  # fmt: skip
        out.write(f"  owing (healing):     index {cell(r['owing_us']['index'])}, "
                  f"trie {cell(r['owing_us']['trie'])}; "
                  f"matches {cell(r['owing_matches'])}\n")  # fmt: skip
        out.write(f"  continuing (UTF-8):  index {cell(r['continuing_us']['index'])}\n")
        out.write(f"  step with owed text: today {cell(s['scan_today'])} "
                  f"(tokens scanned {cell(s['tokens_scanned_today'])}), "
                  f"index {cell(s['index'])}\n")  # fmt: skip
        out.write(f"  every step: top-k argpartition {cell(s['top_k_argpartition'])}, "
                  f"log-softmax {cell(s['log_softmax'])}\n")  # fmt: skip


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.token_index", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--families", nargs="+", default=list(DEFAULT_FAMILIES))
    p.add_argument("--n", type=int, default=400, help="healing queries per family")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=5, help="builds timed per family")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = out or sys.stdout
    results = [bench_family(f, args.n, args.seed, args.repeat) for f in args.families]
    if args.json:
        json.dump({"families": results}, out, indent=2)
        out.write("\n")
    else:
        _print(results, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
