"""Completions off while the server fails, back on when it answers again.

Users expect a dead or misconfigured server to cost them one message, not one per
keystroke, and no waiting: while the server is failing, requests are not sent at all
(``ready`` is false) except one probe at growing intervals (1, 2, 4 ... up to 60 s).  A
failure that a setting must fix first (wrong API key, certificate) waits the longest
interval straight away.  ``failed`` and ``succeeded`` return true exactly when the state
changes, which is when the backend tells the user (``fimlsp/status``, and
``window/showMessage`` once per outage).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .errors import ServerError

__all__ = ["Backoff", "ServerAvailability"]


@dataclass(frozen=True)
class Backoff:
    """Delays between probes of a failing server: ``initial * factor**n`` up to
    ``maximum``, each stretched by up to ``jitter`` (a fraction) so that many editors
    against one server do not probe in step."""

    initial: float = 1.0
    factor: float = 2.0
    maximum: float = 60.0
    jitter: float = 0.1

    def delay(self, failures: int, rng: Callable[[], float] = random.random) -> float:
        """The wait after the ``failures``-th failure in a row (1 for the first)."""
        try:
            base = min(self.maximum, self.initial * self.factor ** max(0, failures - 1))
        except OverflowError:  # far past the maximum (a failure that waits longest)
            base = self.maximum
        return base * (1.0 + self.jitter * rng())


class ServerAvailability:
    """Whether to send requests to a server now; thread-safe.

    Call ``ready()`` before a request (false: completions are off, do not wait), then
    ``succeeded()`` or ``failed(error)`` with the outcome.
    """

    def __init__(
        self,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.backoff = backoff or Backoff()
        self._clock = clock
        self._rng = rng
        self._lock = threading.Lock()
        self.failures = 0
        self.last_error: ServerError | None = None
        self.retry_at = 0.0

    @property
    def down(self) -> bool:
        """Whether the last request failed (completions are off)."""
        return self.failures > 0

    def ready(self) -> bool:
        """True when a request may go now: the server is up, or the next probe is due."""
        with self._lock:
            return self.failures == 0 or self._clock() >= self.retry_at

    def failed(self, error: ServerError) -> bool:
        """Record a failure; True when it starts an outage (tell the user once)."""
        with self._lock:
            self.failures += 1
            self.last_error = error
            count = self.failures if error.transient else 10**6
            self.retry_at = self._clock() + self.backoff.delay(count, self._rng)
            return self.failures == 1

    def succeeded(self) -> bool:
        """Record a success; True when it ends an outage (the server answers again)."""
        with self._lock:
            was_down = self.failures > 0
            self.failures = 0
            self.last_error = None
            self.retry_at = 0.0
            return was_down

    def seconds_to_retry(self) -> float:
        """How long until the next probe (0 when requests may go now)."""
        with self._lock:
            return 0.0 if self.failures == 0 else max(0.0, self.retry_at - self._clock())
