"""From token bytes to middle text: whole characters, token healing, the single-line rule.

Token text comes from the model's vocabulary as bytes; a token that ends inside a UTF-8
sequence is held back until the character is whole.  When the cursor is inside a word,
the word's last token is taken out of the prompt and the first generated tokens must
reproduce it (token healing), because a prompt cut mid-token is text the model never
saw in training.
"""

from __future__ import annotations

from lexer.text import last_line
from lsp_server.model.backend import Backend
from quotient_parser.quotient import QuotientState

__all__ = ["breaks_only_at_end", "can_take_non_ascii", "heal_split", "split_utf8", "token_text"]


def split_utf8(data: bytes) -> tuple[str, bytes] | None:
    """(decodable text, incomplete tail), or None for bytes that are not UTF-8."""
    try:
        return data.decode("utf-8"), b""
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data" or exc.end != len(data):
            return None
        head = data[: exc.start].decode("utf-8")
        return head, data[exc.start :]


def token_text(
    data: bytes, held: bytes, owed: str, single_line: bool
) -> tuple[str, bytes, str] | None:
    """What a token with bytes ``data`` adds: (middle text, bytes held back, text still
    owed to token healing), or None when it cannot come next.

    ``held`` are the bytes of an unfinished character before it, ``owed`` the healed
    text the middle must start with (the token may spell part of it, or all of it and
    more).  With ``single_line`` a token may not end the line.
    """
    split = split_utf8(held + data)
    if split is None:
        return None
    text, held = split
    if owed:
        if owed.startswith(text):
            rest = owed[len(text) :]
            if held and not rest.encode("utf-8").startswith(held):
                return None  # the held bytes cannot become the healed text
            return "", held, rest
        if not text.startswith(owed):
            return None
        text, owed = text[len(owed) :], ""
    if single_line and ("\n" in text or "\r" in text):
        return None
    return text, held, owed


def breaks_only_at_end(text: str) -> bool:
    """Whether ``text`` has no line break but, perhaps, one line end as its very last
    characters: a token that does not go on past the end of a line."""
    body = text.removesuffix("\n").removesuffix("\r")
    return "\n" not in body and "\r" not in body


def heal_split(model: Backend, left: str) -> tuple[str, str]:
    """Split the left context before the last token of a word under the cursor."""
    if not left or not (left[-1].isalnum() or left[-1] == "_"):
        return left, ""
    line = last_line(left)
    tokens = model.tokenize(line)
    if not tokens:
        return left, ""
    last = model.vocab_bytes[tokens[-1]].decode("utf-8", errors="replace")
    if (
        not last
        or not line.endswith(last)
        or not all(c.isalnum() or c == "_" for c in last.strip())
    ):
        return left, ""
    cut = len(left) - len(last)
    return left[:cut], left[cut:]


#: Stand-ins for a character still incomplete in held-back bytes: a letter that can
#: be part of a name, and a symbol that can only be in a string or a comment.
_NON_ASCII_STAND_INS = ("\u00e9", "\u20ac")


def can_take_non_ascii(state: QuotientState) -> bool:
    """Whether some non-ASCII character can come next: a token that ends inside a
    UTF-8 sequence must not lead the middle where no such character fits."""
    return any(state.feed(char).viable for char in _NON_ASCII_STAND_INS)
