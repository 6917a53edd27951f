"""``knownNames``: the decoder's states refuse a middle that loads a name bound nowhere.

The check rides in the quotient state itself, the way ``stayInside`` does
(``quotient_parser/inside.py``): a ``NamedState`` is a ``QuotientState`` whose ``viable``
also asks the name guard (``lsp_server/names``) and whose ``lands`` also asks whether
the middle may end there.  Every place the decoder takes a token's text (the first
viable candidate, the look further down the ranking, steering's candidates and
witnesses, the search for a stopping point inside tokens, a replay) feeds the state and
asks those two, so each honours the check with no change of its own.  ``complete``
stays the syntax alone.
"""

from __future__ import annotations

import logging
import weakref

from lsp_server.names import KnownNames, NameGuard, known_names
from quotient_parser.quotient import Quotient, QuotientState

__all__ = ["NamedState", "analysis", "with_known_names"]

_log = logging.getLogger(__name__)
#: One analysis per quotient: a request's generations (line modes, alternatives,
#: restarts) share it.
_ANALYSES: weakref.WeakKeyDictionary[Quotient, KnownNames] = weakref.WeakKeyDictionary()


class NamedState(QuotientState):
    """A quotient state with the name guard of the same middle beside it."""

    __slots__ = ("inner", "names")

    def __init__(self, inner: QuotientState, names: NameGuard) -> None:
        super().__init__(inner.quotient, inner.state)
        self.inner = inner
        self.names = names

    def feed(self, text: str) -> NamedState:
        if not text:
            return self
        return NamedState(self.inner.feed(text), self.names.feed(text))

    @property
    def viable(self) -> bool:
        """Viable, and no load of a name bound nowhere is completed."""
        return self.inner.viable and self.names.ok

    @property
    def complete(self) -> bool:
        return self.inner.complete

    @property
    def lands(self) -> bool:
        """Lands, and the middle ending here loads no name bound nowhere."""
        return self.inner.lands and self.names.ends_ok


def analysis(quotient: Quotient) -> KnownNames:
    """The names known at the quotient's cursor (worked out once per quotient)."""
    known = _ANALYSES.get(quotient)
    if known is None:
        known = known_names(quotient.left, quotient.right, quotient.target)
        _ANALYSES[quotient] = known
        if known.disabled is not None:
            _log.info("knownNames is off for this file: %s", known.disabled)
    return known


def with_known_names(state: QuotientState) -> tuple[QuotientState, str | None]:
    """``state`` with the name guard beside it, and why the check is off for the file
    (then ``state`` comes back as it was)."""
    if isinstance(state, NamedState):
        return state, None
    known = analysis(state.quotient)
    if known.disabled is not None:
        return state, known.disabled
    guard = NameGuard.start(known, state.quotient.right)
    return NamedState(state, guard), None
