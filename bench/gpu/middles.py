"""Real middles, recorded from a CPU run of a real model and replayed without it.

On the GPU machine the models have random weights (real weights do not travel), and a
random model's middles ask the parser other questions than a real model's.  So the
constrained decoder runs here once over cuts of real code with the real
Qwen2.5-Coder 0.5B, through :class:`RecordingBackend`, which writes down every answer
the model's rankings gave (the top k asked for, the scores and log-probabilities of the
tokens asked about, the probability of ending, the token taken).  There,
:class:`ReplayBackend` gives the decoder the same answers, so ``generate`` (the decoding
library's own loop: candidates, viability checks, stopping points, steering, restarts)
asks the quotient exactly what it asked here, and its parser time per token is that of a
real middle.  The vocabulary (token bytes, end tokens, token index, tokenizer for token
healing) comes from any GGUF with the same tokenizer, such as the random-weight models of
``bench.gpu.models``.

A recording is JSON (xz-compressed): one entry per cut with the file's text, the cut's
offsets, the options, the target version and, per generation the decoder started, the
answers of each step.

Command line (here, with the real model; minutes)::

    python -m bench.gpu.middles OUT.json.xz [--n 10] [--max-tokens 32] [--prompt-budget 512]
        [--model SPEC]
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexer.version import TargetVersion
from lsp_server.decoding import DecodeOptions, generate
from lsp_server.model.backend import Backend, FloatArray, Generation, IdArray, Interrupt
from lsp_server.model.prompt import RepoContext
from lsp_server.model.token_index import TokenIndex

__all__ = [
    "RecordedCut",
    "RecordingBackend",
    "ReplayBackend",
    "load_recording",
    "record_cut",
    "record_cuts",
    "save_recording",
]

#: The format of a recording; bumped when an older one can no longer be replayed.
FORMAT = 1

Step = dict[str, Any]


# ---------------------------------------------------------------- recording


class _RecordingRanking:
    """A ranking that notes every answer it gives into ``step``."""

    def __init__(self, inner: Any, step: Step) -> None:
        self.inner = inner
        self.step = step

    def best(self, k: int) -> IdArray:
        ids: IdArray = self.inner.best(k)
        self.step["best"][str(k)] = ids.tolist()
        return ids

    def scores(self, tokens: IdArray) -> FloatArray:
        out: FloatArray = self.inner.scores(tokens)
        self.step["scores"].update(zip(np.asarray(tokens).tolist(), out.tolist()))
        return out

    def logprob(self, token: int) -> float:
        value = float(self.inner.logprob(token))
        self.step["logprob"][int(token)] = value
        return value

    def end_logprob(self) -> float:
        value = float(self.inner.end_logprob())
        self.step["end"] = value
        return value


def _new_step() -> Step:
    return {"best": {}, "scores": {}, "logprob": {}, "end": None, "advance": None}


class _RecordingGeneration:
    """A generation whose rankings are recorded, one step per position."""

    def __init__(self, inner: Generation, steps: list[Step]) -> None:
        self.inner = inner
        self.steps = steps
        self._current: _RecordingRanking | None = None

    def ranking(self) -> _RecordingRanking:
        if self._current is None:
            step = _new_step()
            self.steps.append(step)
            self._current = _RecordingRanking(self.inner.ranking(), step)
        return self._current

    def advance(self, token: int) -> None:
        if self._current is None:  # advanced without looking: a step of its own
            self.steps.append(_new_step())
        self.steps[-1]["advance"] = int(token)
        self._current = None
        self.inner.advance(token)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> _RecordingGeneration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Delegating:
    """The vocabulary side of a backend, passed on to ``inner``."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    @property
    def vocab_bytes(self) -> Sequence[bytes]:
        return self.inner.vocab_bytes

    @property
    def has_fim(self) -> bool:
        return self.inner.has_fim

    def eog(self, token: int) -> bool:
        return self.inner.eog(token)

    def detected(self) -> dict[str, object]:
        return self.inner.detected()

    @property
    def eog_ids(self) -> Sequence[int]:
        return self.inner.eog_ids

    @property
    def token_index(self) -> TokenIndex:
        return self.inner.token_index

    def tokenize(self, text: str) -> list[int]:
        return self.inner.tokenize(text)

    def build_fim_prompt(
        self,
        prefix: str,
        suffix: str,
        max_new_tokens: int = 128,
        path: str = "",
        budget: int | None = None,
        *,
        context: RepoContext | None = None,
    ) -> list[int]:
        return self.inner.build_fim_prompt(
            prefix, suffix, max_new_tokens, path, budget, context=context
        )

    def describe(self) -> str:
        return self.inner.describe()

    def close(self) -> None:
        """The inner backend belongs to the caller: nothing to release here."""


class RecordingBackend(_Delegating):
    """A real backend whose generations are recorded: ``generations`` holds, per
    ``start``, the answers of each step."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.generations: list[list[Step]] = []

    def prefill(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> None:
        self.inner.prefill(prompt, interrupt)

    def start(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> Generation:
        steps: list[Step] = []
        self.generations.append(steps)
        return _RecordingGeneration(self.inner.start(prompt, interrupt), steps)


# ---------------------------------------------------------------- replay


@dataclass
class Divergence:
    """Questions the replay asked that the recording cannot answer (0 everywhere: the
    decoder took exactly the recorded path)."""

    missing_answers: int = 0
    other_tokens: int = 0
    extra_steps: int = 0
    extra_generations: int = 0

    @property
    def total(self) -> int:
        return self.missing_answers + self.other_tokens + self.extra_steps + self.extra_generations


class _ReplayRanking:
    """The recorded answers of one step."""

    def __init__(self, step: Step, divergence: Divergence) -> None:
        self.step = step
        self.divergence = divergence

    def best(self, k: int) -> IdArray:
        recorded: dict[str, list[int]] = self.step["best"]
        ids = recorded.get(str(k))
        if ids is None:  # not asked with this k: the longest list recorded, cut to k
            self.divergence.missing_answers += 1
            longest: list[int] = max(recorded.values(), key=len, default=[])
            ids = longest[:k]
        return np.asarray(ids, dtype=np.intp)

    def scores(self, tokens: IdArray) -> FloatArray:
        table = self.step["scores"]
        out = np.fromiter(
            (table.get(int(t), -math.inf) for t in np.asarray(tokens).tolist()),
            dtype=np.float32,
            count=len(tokens),
        )
        missing = int(np.count_nonzero(~np.isfinite(out)))
        if missing:
            self.divergence.missing_answers += missing
        return out

    def logprob(self, token: int) -> float:
        value = self.step["logprob"].get(int(token))
        if value is None:
            self.divergence.missing_answers += 1
            return -math.inf
        return float(value)

    def end_logprob(self) -> float:
        value = self.step["end"]
        if value is None:
            self.divergence.missing_answers += 1
            return -math.inf
        return float(value)


_NO_STEP: Step = _new_step()


class _ReplayGeneration:
    """A recorded generation: its steps in order, moved on by ``advance``."""

    def __init__(self, steps: Sequence[Step], divergence: Divergence) -> None:
        self.steps = steps
        self.at = 0
        self.divergence = divergence

    def ranking(self) -> _ReplayRanking:
        if self.at >= len(self.steps):
            self.divergence.extra_steps += 1
            return _ReplayRanking(_NO_STEP, self.divergence)
        return _ReplayRanking(self.steps[self.at], self.divergence)

    def advance(self, token: int) -> None:
        if self.at < len(self.steps) and self.steps[self.at]["advance"] != int(token):
            self.divergence.other_tokens += 1
        self.at += 1

    def close(self) -> None:
        pass

    def __enter__(self) -> _ReplayGeneration:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class ReplayBackend(_Delegating):
    """The recorded generations of one cut, in order, over ``vocab``'s vocabulary."""

    def __init__(self, vocab: Backend, generations: Sequence[Sequence[Step]]) -> None:
        super().__init__(vocab)
        self.generations = generations
        self.started = 0
        self.divergence = Divergence()

    def prefill(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> None:
        pass

    def start(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> Generation:
        if self.started >= len(self.generations):
            self.divergence.extra_generations += 1
            steps: Sequence[Step] = ()
        else:
            steps = self.generations[self.started]
        self.started += 1
        return _ReplayGeneration(steps, self.divergence)


# ---------------------------------------------------------------- the file


@dataclass
class RecordedCut:
    """One cut of real code and what the real model answered while completing it."""

    kind: str
    file: str
    where: str
    text: str
    left_end: int
    middle_end: int
    target: str
    max_tokens: int
    prompt_budget: int | None
    middle: str
    token_ids: list[int]
    stop_reason: str
    parser_us: list[float]
    generations: list[list[Step]] = field(default_factory=list)

    @property
    def left(self) -> str:
        return self.text[: self.left_end]

    @property
    def right(self) -> str:
        return self.text[self.middle_end :]

    def options(self) -> DecodeOptions:
        return DecodeOptions(
            mode="constrained", max_tokens=self.max_tokens, prompt_budget=self.prompt_budget
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "file": self.file,
            "where": self.where,
            "text": self.text,
            "left_end": self.left_end,
            "middle_end": self.middle_end,
            "target": self.target,
            "max_tokens": self.max_tokens,
            "prompt_budget": self.prompt_budget,
            "middle": self.middle,
            "token_ids": self.token_ids,
            "stop_reason": self.stop_reason,
            "parser_us": self.parser_us,
            "generations": [[_step_json(s) for s in g] for g in self.generations],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RecordedCut:
        gens = [[_step_from_json(s) for s in g] for g in d["generations"]]
        fields = {k: v for k, v in d.items() if k != "generations"}
        fields.setdefault("prompt_budget", None)  # recordings of the first days
        return cls(**fields, generations=gens)


def _step_json(step: Step) -> dict[str, Any]:
    """Integer keys as JSON allows them: parallel lists."""
    return {
        "best": step["best"],
        "scores": [list(step["scores"]), list(step["scores"].values())],
        "logprob": [list(step["logprob"]), list(step["logprob"].values())],
        "end": step["end"],
        "advance": step["advance"],
    }


def _step_from_json(d: dict[str, Any]) -> Step:
    return {
        "best": d["best"],
        "scores": dict(zip(*d["scores"])),
        "logprob": dict(zip(*d["logprob"])),
        "end": d["end"],
        "advance": d["advance"],
    }


def save_recording(path: Path, cuts: Sequence[RecordedCut], about: dict[str, Any]) -> None:
    """Write the recording (xz-compressed JSON when ``path`` ends in .xz)."""
    doc = {"format": FORMAT, **about, "cuts": [c.to_json() for c in cuts]}
    data = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(lzma.compress(data, preset=9) if path.suffix == ".xz" else data)
    tmp.replace(path)


def load_recording(path: Path) -> tuple[dict[str, Any], list[RecordedCut]]:
    """(what the recording says about itself, its cuts)."""
    raw = path.read_bytes()
    doc = json.loads(lzma.decompress(raw) if path.suffix == ".xz" else raw)
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path}: recording format {doc.get('format')}, expected {FORMAT}")
    cuts = [RecordedCut.from_json(c) for c in doc.pop("cuts")]
    return doc, cuts


# ---------------------------------------------------------------- making one


def _cuts(n: int, seed: int) -> Iterator[tuple[Any, str, str]]:
    """(cut, file text, where) for ``n`` cuts of each kind of the standard library, as
    ``bench.fim_quality`` draws them."""
    from bench.corpus import LineIndex, stdlib_corpus
    from bench.oracle import Oracle
    from bench.quotient_check import CUT_KINDS, Corpus, make_cuts

    with Oracle(sys.executable) as oracle:
        corpus = Corpus(stdlib_corpus(), oracle)
        cuts = [cut for kind in CUT_KINDS for cut in make_cuts(corpus, kind, n, seed)]
        for cut in cuts:
            source = corpus.by_name(cut.file)
            if source is not None:
                yield cut, source.text, LineIndex(source.text).where(cut.left_end)


def record_cut(
    model: Backend,
    text: str,
    offsets: tuple[int, int],
    *,
    max_tokens: int = 32,
    prompt_budget: int | None = None,
    target: str | None = None,
    kind: str = "",
    file: str = "",
    where: str = "",
) -> tuple[RecordedCut, float]:
    """Complete ``text[:offsets[0]]`` / ``text[offsets[1]:]`` with ``model`` (constrained,
    greedy), recording; the recorded cut and the seconds it took."""
    version = target or f"{sys.version_info[0]}.{sys.version_info[1]}"
    recorder = RecordingBackend(model)
    options = DecodeOptions(mode="constrained", max_tokens=max_tokens, prompt_budget=prompt_budget)
    t0 = time.perf_counter()
    done = generate(
        recorder,
        text[: offsets[0]],
        text[offsets[1] :],
        options,
        target=TargetVersion.parse(version),
    )
    seconds = time.perf_counter() - t0
    cut = RecordedCut(
        kind=kind,
        file=file,
        where=where,
        text=text,
        left_end=offsets[0],
        middle_end=offsets[1],
        target=version,
        max_tokens=max_tokens,
        prompt_budget=prompt_budget,
        middle=done.middle,
        token_ids=list(done.token_ids),
        stop_reason=str(done.stop_reason),
        parser_us=[round(us, 2) for us in done.parser_us],
        generations=recorder.generations,
    )
    return cut, seconds


def record_cuts(
    model: Backend,
    n: int,
    seed: int,
    max_tokens: int,
    prompt_budget: int | None = None,
    log: Any = None,
) -> list[RecordedCut]:
    """``n`` cuts of each kind of the standard library, as ``bench.fim_quality`` draws
    them, recorded (``record_cut``).

    ``prompt_budget`` (tokens of text in the prompt) keeps the prompts short: on a
    loaded CPU reading them is what takes the time, and the parser sees the whole file
    whatever the prompt holds."""
    out: list[RecordedCut] = []
    for cut, text, where in _cuts(n, seed):
        recorded, seconds = record_cut(
            model,
            text,
            cut.offsets,
            max_tokens=max_tokens,
            prompt_budget=prompt_budget,
            kind=cut.kind,
            file=cut.file,
            where=where,
        )
        if log is not None:
            log(
                f"{cut.file}:{where} {len(recorded.token_ids)} tokens, {recorded.stop_reason}, "
                f"{seconds:.1f} s: {recorded.middle!r}"
            )
        out.append(recorded)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu.middles", description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="the real model (SPEC)")
    p.add_argument("--n", type=int, default=10, help="cuts of each kind")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ctx-size", type=int, default=2048)
    p.add_argument("--prompt-budget", type=int, default=512, help="tokens of text")
    args = p.parse_args(argv)
    from lsp_server.model import open_model

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    t0 = time.monotonic()
    with open_model(args.model, n_ctx=args.ctx_size, n_threads=args.threads) as model:
        cuts = record_cuts(model, args.n, args.seed, args.max_tokens, args.prompt_budget, log)
        about = {
            "model": args.model,
            "model_file": Path(model.path).name,
            "n_per_kind": args.n,
            "seed": args.seed,
            "ctx_size": args.ctx_size,
            "prompt_budget": args.prompt_budget,
            "recorded_with": f"python -m bench.gpu.middles --n {args.n} --seed {args.seed} "
            f"--max-tokens {args.max_tokens} --prompt-budget {args.prompt_budget} "
            f"--model {args.model}",
        }
    save_recording(args.out, cuts, about)
    tokens = sum(len(c.token_ids) for c in cuts)
    log(f"{len(cuts)} cuts, {tokens} tokens in {time.monotonic() - t0:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
