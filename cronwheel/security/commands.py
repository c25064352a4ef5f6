"""Which executables a worker may run for command actions: its operator's allow-list
(``cronwheel worker --allow-command PATTERN``; docs/actions.md#command-actions).

Tenants are hostile: a worker runs no command unless its operator allowed the executable.
The worker checks before it starts one (cronwheel.actions.command), and the API checks
the patterns live workers announce before it takes a command job (cronwheel.control.commands):
both read them here, so they agree.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable


class AllowList:
    """The executables a worker may run, from its operator's patterns (shell globs,
    ``fnmatch``):

    - a pattern without ``/`` matches a command *name* (``pg_dump``, ``backup-*``) as
      ``argv[0]`` gives it, which the worker finds on its own ``PATH``;
    - a pattern with ``/`` matches an absolute path (``/opt/jobs/*``) as ``argv[0]``
      gives it (a name is not looked up for it: what the API checks is what runs);
    - ``*`` alone allows every executable (a shell or an interpreter allowed this way,
      or any other way, runs whatever its arguments say: allow one only for trusted
      tenants).
    """

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.patterns = tuple(patterns)
        for pattern in self.patterns:
            why = pattern_problem(pattern)
            if why is not None:
                raise ValueError(f"--allow-command {pattern!r}: {why}")
        self._names = [p for p in self.patterns if "/" not in p]
        self._paths = [p for p in self.patterns if "/" in p]

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def allows(self, program: str) -> bool:
        """Whether ``program`` (``argv[0]``) may run."""
        if "*" in self.patterns:
            return True
        patterns = self._paths if program.startswith("/") else self._names
        return any(fnmatch.fnmatchcase(program, p) for p in patterns)


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not an allow-command pattern (None: it is one)."""
    if not pattern.strip():
        return "a pattern cannot be empty"
    if "\x00" in pattern:
        return "a pattern cannot hold a NUL character"
    if "/" in pattern and not pattern.startswith("/"):
        return "a pattern with '/' is an absolute path (/opt/jobs/*), or give a command name"
    return None
