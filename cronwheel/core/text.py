"""Text a person reads in a terminal or a log: what a name may not contain, and how a log
line shows what it must not write raw (docs/security.md, "Names and logs").

A name (of a job, a pipeline, a tenant, a key) is printed by ``jobs get``, the dashboard
and every log line about it. A control character in it (newline, CR, ESC…) forges log
lines or drives the terminal that shows it; a bidi override (U+202E…) shows it in an
order other than its own. Such names are refused at creation; log lines escape any
such character whatever its source."""

from __future__ import annotations

import unicodedata
from typing import Final

BIDI_CONTROLS: Final = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""The bidi formatting characters: marks, embeddings, overrides and isolates."""
LINE_SEPARATORS: Final = frozenset("\u2028\u2029")
"""Unicode's line and paragraph separators: line breaks to many viewers."""
NAME_PATTERN: Final = (
    r"^[^\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
    r"\u2028\u2029\ud800-\udfff]*$"
)
"""What :func:`check_name` lets through, as a regular expression for the OpenAPI
document: no control character (category Cc: C0, DEL, C1), bidi control or line
separator, and no lone surrogate (the API refuses one in any string)."""


def unsafe_character(text: str) -> str | None:
    """The first character of ``text`` a name may not hold, or None: a control character
    (C0, DEL, C1), a bidi control, or a line or paragraph separator."""
    if text.isprintable():  # the common case, in C: none of them is printable
        return None
    for char in text:
        if char in BIDI_CONTROLS or char in LINE_SEPARATORS or unicodedata.category(char) == "Cc":
            return char
    return None


def check_name(name: str) -> str:
    """``name`` if a terminal and a log may show it as it is; ValueError naming the
    first character that may not be in a name, by its code point."""
    char = unsafe_character(name)
    if char is not None:
        kind = "a bidi control" if char in BIDI_CONTROLS else "a control character"
        if char in LINE_SEPARATORS:
            kind = "a line separator"
        raise ValueError(
            f"contains U+{ord(char):04X} ({kind}): names are shown in terminals and logs,"
            " so control and bidi characters are refused"
        )
    return name


def _escape(code: int) -> str:
    if code == 0x09:
        return "\\t"
    if code == 0x0A:
        return "\\n"
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_ESCAPES: Final = {
    code: _escape(code)
    for code in (
        *range(0x20),
        *range(0x7F, 0xA0),
        *(ord(c) for c in BIDI_CONTROLS | LINE_SEPARATORS),
    )
}


def escape_controls(text: str) -> str:
    """``text`` with every control character, bidi control and line separator written
    as an escape (``\\n``, ``\\x1b``, ``\\u202e``): one log record stays one line, and
    nothing in it reaches the terminal as a command."""
    if text.isprintable():  # most lines, checked in C: translate's per-character lookups
        return text  # cost a busy worker about a microsecond a line (none is printable)
    return text.translate(_ESCAPES)
