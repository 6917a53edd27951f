"""What one decoding step offers a policy that chooses for it.

The decoder (:mod:`.loop`) owns the step: the middle so far, its quotient state, the
token budget and the backend.  Steering (:mod:`.steering`) is a policy it consults; it
reads the step through :class:`StepView` and takes a token only through ``take``, so
it depends on this contract and not on the decoder's class (no import cycle, no
private members).
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import TYPE_CHECKING, Protocol

from lsp_server.model.backend import Backend, IdArray, TokenRanking

if TYPE_CHECKING:
    from quotient_parser.quotient import QuotientState

    from .options import DecodeOptions
    from .stopping import StopCheck, StoppingPoints

__all__ = ["Choice", "StepView"]

#: A choice: (token, whether it ends the generation), or None when nothing fits.
Choice = tuple[int, bool] | None


class StepView(Protocol):
    """The decoder's step as a policy sees it."""

    backend: Backend
    opts: DecodeOptions
    stop: StopCheck
    points: StoppingPoints

    @property
    def state(self) -> QuotientState | None: ...
    @property
    def middle(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def held(self) -> bytes: ...
    @property
    def owed(self) -> str: ...
    @property
    def vocab(self) -> Sequence[bytes]: ...

    def banned_here(self) -> Container[int]:
        """Tokens not to take at this step (an alternative branching off here)."""
        ...

    def text_of(self, token: int) -> tuple[str, bytes, str] | None:
        """(middle text, held bytes, owed text) after ``token``, or None."""
        ...

    def further_order(self, order: IdArray, ranking: TokenRanking) -> IdArray:
        """Candidates below those of ``order`` in the model's ranking, most likely first."""
        ...

    def take(
        self,
        token: int,
        text: str,
        held: bytes,
        owed: str,
        new_state: QuotientState,
        ranking: TokenRanking,
        order: IdArray,
    ) -> None:
        """Take a candidate chosen from ``order`` at this step."""
        ...
