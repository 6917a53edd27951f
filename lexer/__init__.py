"""Incremental, indentation-aware lexer for Python source (targets 3.8 .. 3.15).

Symbols are plain tuples ``(kind, text, start)`` (see ``docs/architecture.md``)::

    >>> from lexer import LexState
    >>> st = LexState.initial(target=(3, 13))
    >>> st2, symbols = st.feed("x = 1\\nif")
    >>> symbols
    [('NAME', 'x', 0), ('=', '=', 2), ('NUMBER', '1', 4), ('NEWLINE', '\\n', 5)]
    >>> st2.pending, sorted(st2.pending_kinds())
    ('if', ['NAME', 'if'])
    >>> st2.emit_pending()[1]
    [('if', 'if', 6)]

Design: a branching lexer without the branches
----------------------------------------------
Text arrives in arbitrary chunks, down to single characters, so the lexer
never has look-ahead: when ``if`` has been read it cannot know whether the
symbol ends there or becomes ``iff``.  The branching lexer of the seed paper
(section V-A) keeps two live branches: the *extend* branch (the symbol in
progress goes on) and the *emit* branch (it ends here), the latter guarded so
that it dies as soon as a longer match appears.  Here both branches live in
one immutable :class:`LexState`:

* a committed context -- the indentation stack, the open brackets, the open
  f-strings and whether the next character starts a line -- and
* the *pending* text: everything fed after the last certain symbol.

:meth:`LexState.feed` joins the pending text and the new chunk and re-lexes
them from the committed context with CPython's own leftmost-longest rules
(``0or 1`` commits to an octal literal and fails, ``1if x else y`` is a
number then ``if``, ``1e`` may still be ``1`` followed by ``else``).  Every
symbol whose extent and validity no longer depend on unseen text is emitted;
the lexer stops at the first one that still does, which becomes the new
pending text.  This is the extend branch.  :meth:`LexState.emit_pending` is
the emit branch taken explicitly (the pending text is ended as if a
separator followed, and the state can still be fed), and
:meth:`LexState.finish` is the emit branch at the end of input (plus the
final NEWLINE, DEDENTs and ENDMARKER).  Because a re-lex sees the pending
text and the new chunk together, the guard of the emit branch is implicit,
and the symbols and errors do not depend on how the text was chunked.

Errors (:class:`LexError`, with a :class:`LexErrorCode` saying what went
wrong) are raised as soon as the text can no longer be a prefix of
lexically valid source for the target version, matching CPython's tokenizer
and literal decoding: bad characters, number literals, escapes, unterminated
strings, indentation (IndentationError and TabError), brackets, line
continuations, NUL characters, CPython's nesting limits and, for targets
before 3.12, the old restrictions on f-string expressions.  Blank lines and
comments produce no symbols; ``\\r\\n`` and lone ``\\r`` are newlines as for
``compile()``.  f-strings are tokenized as Python 3.12 does for every target,
and t-strings (3.14+) alike, with their own symbol kinds.

Speed: one compiled-regex match per token on the bulk path, states are a few
slots holding tuples and strings, and the pending text is the symbol in
progress only (whitespace and comments are committed as soon as they end).
"""

from .errors import LexError, LexErrorCode
from .state import LONGEST_KEYWORD, LexState, Symbol
from .version import TargetVersion

__all__ = ["LONGEST_KEYWORD", "LexError", "LexErrorCode", "LexState", "Symbol", "TargetVersion"]
