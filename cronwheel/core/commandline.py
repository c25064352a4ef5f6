"""A command action's ``argv`` written as one line, the way a shell would split it.

``cronwheel jobs create --command LINE`` and the dashboard's job form both read a command
line by this one rule (decision 0053): words split at blanks, ``'...'`` and ``"..."``
quote, ``\\`` escapes (POSIX :func:`shlex.split`). No shell runs the result: ``|``, ``>``,
``&&``, ``;`` (outside quotes), ``` `...` `` and ``$(...)`` (outside single quotes) would
reach the program as literal words, so such a line is refused with the way to write it
instead, rather than turned into a job that quietly does something else. ``$NAME`` is not expanded
either, and is left alone: a literal ``$`` is a common argument (a password's, a regex).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

_OPERATOR_CHARS = "|&;<>`"


def _unquoted_operator(line: str) -> str | None:
    """The first shell operator outside quotes, or command substitution outside single
    quotes, or None."""
    quote: str | None = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            # A shell substitutes commands between double quotes too.
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
            elif c == "`" or (c == "$" and line[i + 1 : i + 2] == "("):
                return c if c == "`" else "$("
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c == "$" and line[i + 1 : i + 2] == "(":
            return "$("
        elif c in _OPERATOR_CHARS:
            end = i
            while end < len(line) and line[end] in _OPERATOR_CHARS:
                end += 1
            return line[i:end]
        i += 1
    return None


def split_command_line(line: str) -> list[str]:
    """``line`` as ``argv``: ``ValueError`` saying why when it cannot be one (an open
    quote, nothing in it, a shell operator no shell would see)."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        # shlex says "No closing quotation" / "No escaped character".
        raise ValueError(
            f"{line!r} cannot be split into words: {str(exc).lower()}"
            " (quote words with ' or \", escape a lone quote with \\)"
        ) from None
    if not argv:
        raise ValueError(
            "is empty: give the program, then its arguments ('pg_dump -f /backups/db.sql')"
        )
    operator = _unquoted_operator(line)
    if operator is not None:
        shell = shlex.join(["sh", "-c", line])
        raise ValueError(
            f"{operator!r} is shell syntax, but no shell runs the command: its words"
            f" become the program's arguments as they are. For a shell, write {shell}"
            f" (and the workers must allow sh); to pass {operator!r} as an argument, quote it"
        )
    return argv


def join_command_line(argv: Sequence[str]) -> str:
    """``argv`` as the line :func:`split_command_line` reads back to the same words."""
    return shlex.join(argv)
