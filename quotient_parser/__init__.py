"""Incremental recognition of Python (and, later, of FIM quotient languages).

The public entry point is :class:`Recognizer`::

    >>> from quotient_parser import Recognizer
    >>> rec = Recognizer("3.13")
    >>> s = rec.initial().feed("for x in y:\\n")
    >>> s.viable, s.complete
    (True, False)
    >>> s = s.feed("    pass\\n")
    >>> s.complete
    True

States are immutable values: ``feed`` returns a new state and any number of
states can be alive at once.  See ``docs/architecture.md`` for the design.
"""

from lexer.version import TargetVersion

from .grammar_tools import Grammar, GrammarError, load_grammar
from .newer_syntax import NewerSyntax, find_newer_syntax
from .recognizer import Recognizer, RecognizerState, SourceDecodeError, decode_source

__all__ = [
    "Grammar",
    "GrammarError",
    "NewerSyntax",
    "Recognizer",
    "RecognizerState",
    "SourceDecodeError",
    "TargetVersion",
    "decode_source",
    "find_newer_syntax",
    "load_grammar",
]
