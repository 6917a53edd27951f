"""Does project context help?  Cuts in multi-module packages, with and without it.

Usage::

    python -m bench.cross_file [--model SPEC] [--n N] [--seed S] [--max-tokens N]
        [--threads N] [--packages NAME...] [--stdlib PATH] [--prompt-budget N]
        [--context-tokens N] [--kinds KIND...] [--cross-only] [--json]

The cuts are :mod:`bench.code_cuts`' (the rest of a line after a token, and a block's
body) in the modules of multi-module packages of a standard library (``--stdlib``, by
default the running interpreter's; the packages ``email``, ``json``, ``asyncio``,
``importlib`` and ``concurrent``), drawn in turn from each package; with ``--cross-only``
only cuts whose true middle uses a name the file imports from its own package (the
cuts where the other modules hold what the model needs to know).  Each cut is completed
twice by what the language server runs (constrained decoding, ``lineMode`` ``auto``,
greedy), from a prompt of ``--prompt-budget`` tokens of the file's own text:

``off``  the file alone;
``on``   headed by project context (:mod:`lsp_server.project`) of at most
         ``--context-tokens`` tokens, chosen as the server chooses it for a workspace
         made of the package's folder (with the interpreter's installed packages), no
         document open but the one being completed.

Per run: exact match (trailing blanks aside), edit similarity (one less the Levenshtein
distance over the longer length), validity (``ast.parse`` of this interpreter on the
completed file), the prompt's tokens and, for ``on``, the context's, with the time to
read the prompt and to complete.  Each run starts from an empty KV cache (no run borrows
another's positions).  The file with the true middle is on disk: context
never includes it (the current file is left out by construction), only the package's
other modules.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import time
import tokenize
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from bench.code_cuts import make_code_cuts
from bench.corpus import CorpusFile, stdlib_root
from bench.grammar_coverage import Oracle
from bench.quotient_check import Corpus, Cut
from lexer.version import TargetVersion
from lsp_server.decoding import DecodeOptions, build_prompt
from lsp_server.decoding.attempts import Allowance, generate_middles
from lsp_server.decoding.edit_distance import edit_similarity
from lsp_server.model import FimModel, open_model
from lsp_server.model.prompt import RepoContext
from lsp_server.project import ProjectContext, ProjectView
from lsp_server.project.imports import find_imports
from quotient_parser.quotient import Quotient

__all__ = ["PACKAGES", "main"]

PACKAGES = ("email", "json", "asyncio", "importlib", "concurrent")
#: With ``--cross-only``, cuts drawn per cut kept.
CROSS_DRAW = 30
KINDS = ("after-token", "block")


@dataclass
class Run:
    """One completion of a cut."""

    middle: str
    exact: bool
    edit_similarity: float
    valid: bool
    prompt_tokens: int
    context_tokens: int
    context_files: int
    prompt_ms: float
    total_ms: float
    stop_reason: str


@dataclass
class CaseResult:
    package: str
    kind: str
    where: str
    truth: str
    runs: dict[str, Run] = field(default_factory=dict)


def package_cuts(
    stdlib: Path,
    package: str,
    kind: str,
    n: int,
    seed: int,
    oracle: Oracle,
    cross_only: bool = False,
) -> list[tuple[Cut, Path, str]]:
    """``n`` cuts of ``kind`` in the package's modules: (cut, file, text).  ``cross_only``:
    only cuts whose true middle uses a name the file imports from its own package (drawn
    from up to ``CROSS_DRAW`` times as many cuts)."""
    root = stdlib / package
    files = sorted(root.rglob("*.py"))
    corpus = Corpus([CorpusFile(p.relative_to(stdlib).as_posix(), p) for p in files], oracle)
    out = []
    drawn = n * CROSS_DRAW if cross_only else n
    for cut in make_code_cuts(corpus, kind, drawn, seed):  # type: ignore[arg-type]
        source = corpus.by_name(cut.file)
        assert source is not None
        if cross_only and not uses_package_names(
            cut.middle, source.text[: cut.left_end], source.text, package
        ):
            continue
        out.append((cut, stdlib / cut.file, source.text))
        if len(out) == n:
            break
    return out


def package_names(text: str, package: str) -> set[str]:
    """The names a module of ``package`` binds by importing from the package itself
    (``from .x import a``, ``from package.x import a as b``, ``from . import x``,
    ``import package.x as y``)."""
    names: set[str] = set()
    for statement in find_imports(text):
        own = statement.level > 0 or statement.module.split(".")[0] == package
        if not own:
            continue
        if statement.names:
            names.update(alias or name for name, alias in statement.names if name != "*")
        elif statement.alias:
            names.add(statement.alias)
    return names


def uses_package_names(middle: str, left: str, text: str, package: str) -> bool:
    """Whether ``middle`` uses a name its file imports from its own package, outside an
    import statement (where the name is the import itself, not a use)."""
    line = left[left.rfind("\n") + 1 :].lstrip()
    if re.match(r"(import|from)\b", line) or re.search(r"\b(import|from) ", middle):
        return False
    return bool(package_names(text, package) & code_names(middle))


def code_names(middle: str) -> set[str]:
    """The identifiers of ``middle``'s code: not in its strings or comments (Python's
    tokenizer, as far as the fragment goes)."""
    names = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(middle).readline):
            if token.type == tokenize.NAME:
                names.add(token.string)
    except (tokenize.TokenError, SyntaxError):
        pass  # an open bracket or string at the fragment's end: the names before it count
    return names


def parses(source: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(source)
        except (SyntaxError, ValueError):
            return False
    return True


class Runner:
    def __init__(self, model: FimModel, args: argparse.Namespace) -> None:
        self.model = model
        self.args = args
        self.target = TargetVersion(3, 11)
        self.options = DecodeOptions(max_tokens=args.max_tokens, prompt_budget=args.prompt_budget)

    def context(self, file: Path, workspace: Path, left: str, right: str) -> RepoContext | None:
        project = ProjectContext(ProjectView())
        return project.for_request(
            file.as_uri(),
            left,
            right,
            [str(workspace)],
            self.args.context_tokens,
            self.model.tokenize,
        )

    def complete(self, left: str, right: str, truth: str, context: RepoContext | None) -> Run:
        options = replace(self.options, project_context=context)
        # Each run reads its whole prompt: the cache would otherwise lend the run without
        # context positions shifted from the run with it, whose deeper layers saw it.
        self.model.cache.reset()
        started = time.perf_counter()
        prompt, _ = build_prompt(self.model, left, right, options)
        self.model.prefill(prompt)
        prompt_ms = (time.perf_counter() - started) * 1e3
        quotient = Quotient(left, right, self.target, stay_inside=True)

        allowance = Allowance(lambda single: replace(options, single_line=single))
        completion = generate_middles(self.model, quotient, "auto", allowance).first
        middle = completion.middle
        head = len(self.model.prompts.context_tokens(context))
        return Run(
            middle=middle,
            exact=middle.rstrip() == truth.rstrip(),
            edit_similarity=round(edit_similarity(middle, truth), 4),
            valid=parses(left + middle + right),
            prompt_tokens=len(prompt),
            context_tokens=head
            if head and prompt[:head] == self.model.prompts.context_tokens(context)
            else 0,
            context_files=len(context.files) if context is not None else 0,
            prompt_ms=round(prompt_ms, 1),
            total_ms=round((time.perf_counter() - started) * 1e3, 1),
            stop_reason=str(completion.stop_reason),
        )

    def run(self, package: str, kind: str, cut: Cut, file: Path, text: str) -> CaseResult:
        left, right = text[: cut.left_end], text[cut.middle_end :]
        workspace = Path(self.args.stdlib) / package
        result = CaseResult(package, kind, f"{cut.file}@{cut.left_end}", cut.middle)
        context = self.context(file, workspace, left, right)
        result.runs["on"] = self.complete(left, right, cut.middle, context)
        result.runs["off"] = self.complete(left, right, cut.middle, None)
        return result


def summary_of(results: Sequence[CaseResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("on", "off"):
        runs = [r.runs[mode] for r in results]
        n = len(runs) or 1
        out[mode] = {
            "exact_match": round(sum(r.exact for r in runs) / n, 3),
            "edit_similarity": round(sum(r.edit_similarity for r in runs) / n, 3),
            "valid": round(sum(r.valid for r in runs) / n, 3),
            "prompt_tokens_mean": round(sum(r.prompt_tokens for r in runs) / n, 1),
            "context_tokens_mean": round(sum(r.context_tokens for r in runs) / n, 1),
            "context_files_mean": round(sum(r.context_files for r in runs) / n, 2),
            "prompt_ms_median": sorted(r.prompt_ms for r in runs)[len(runs) // 2] if runs else 0,
            "total_ms_median": sorted(r.total_ms for r in runs)[len(runs) // 2] if runs else 0,
        }
    on, off = ([r.runs[m] for r in results] for m in ("on", "off"))
    out["changed"] = sum(a.middle != b.middle for a, b in zip(on, off))
    out["on_better_exact"] = sum(a.exact and not b.exact for a, b in zip(on, off))
    out["off_better_exact"] = sum(b.exact and not a.exact for a, b in zip(on, off))
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.cross_file", description=__doc__.split("\n")[0]
    )
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--n", type=int, default=30, help="cuts in all (split over packages, kinds)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--packages", nargs="+", default=list(PACKAGES))
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--stdlib", default=str(stdlib_root()))
    p.add_argument("--prompt-budget", type=int, default=768, help="tokens of the file's text")
    p.add_argument("--context-tokens", type=int, default=512, help="tokens of project context")
    p.add_argument("--context-size", type=int, default=4096)
    p.add_argument("--cross-only", action="store_true",
                   help="only cuts whose true middle uses a name the file imports from "
                   "its own package")  # fmt: skip
    p.add_argument("--json", action="store_true", help="the whole report as JSON")
    return p


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    started = time.perf_counter()
    groups = [(p, k) for p in args.packages for k in args.kinds]
    per_group = [args.n // len(groups) + (i < args.n % len(groups)) for i in range(len(groups))]
    with Oracle(sys.executable) as oracle:
        cuts = [
            (package, kind, *cut)
            for (package, kind), n in zip(groups, per_group)
            if n
            for cut in package_cuts(
                Path(args.stdlib), package, kind, n, args.seed, oracle, args.cross_only
            )
        ]
    model = open_model(args.model, n_ctx=args.context_size, n_threads=args.threads)
    results = []
    with model:
        runner = Runner(model, args)
        for i, (package, kind, cut, file, text) in enumerate(cuts, 1):
            results.append(runner.run(package, kind, cut, file, text))
            print(f"[{i}/{len(cuts)}] {results[-1].where}", file=sys.stderr)
    report: dict[str, Any] = {
        "setup": {k: v for k, v in vars(args).items() if k != "json"},
        "model": model.describe(),
        "wall_s": round(time.perf_counter() - started, 1),
        "summary": summary_of(results),
        "by_package": {
            p: summary_of([r for r in results if r.package == p]) for p in args.packages
        },
        "by_kind": {k: summary_of([r for r in results if r.kind == k]) for k in args.kinds},
        "cases": [
            {
                "package": r.package,
                "kind": r.kind,
                "where": r.where,
                "truth": r.truth,
                "runs": {m: asdict(run) for m, run in r.runs.items()},
            }
            for r in results
        ],
    }
    if args.json:
        json.dump(report, out, indent=1)
        out.write("\n")
    else:
        s: dict[str, Any] = report["summary"]
        out.write(f"{len(results)} cuts, {report['model']}, {report['wall_s']} s\n")
        for mode in ("on", "off"):
            m = s[mode]
            out.write(
                f"context {mode:3}: exact {m['exact_match']:.3f}  edit sim "
                f"{m['edit_similarity']:.3f}  valid {m['valid']:.3f}  prompt tokens "
                f"{m['prompt_tokens_mean']:.0f} (context {m['context_tokens_mean']:.0f})\n"
            )
        out.write(
            f"changed {s['changed']}, on better {s['on_better_exact']}, "
            f"off better {s['off_better_exact']}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
