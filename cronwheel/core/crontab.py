"""A user's crontab read as command jobs (``cronwheel import crontab``, decision 0052).

Each entry becomes the spec of a cron job whose action runs the entry's command through
the crontab's shell, as cron does (``["/bin/sh", "-c", COMMAND]``). What cron does with
the rest of the file is kept where cronwheel can: ``CRON_TZ``/``TZ`` set the zone of the
entries after them, other ``NAME=value`` lines their environment, ``%`` ends the command
and starts its stdin. What cronwheel cannot do is said per line: ``@reboot`` and invalid
entries are errors (nothing is imported), ``PATH`` and ``MAILTO`` are warnings.

Pure: no I/O, no clock. The CLI compares the specs with the jobs already there.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from cronwheel.core.jobspec import JobSpec, refused_env_name
from cronwheel.errors import InvalidInput
from cronwheel.schedule.api import validate_cron
from cronwheel.schedule.dialects import MACROS
from cronwheel.schedule.timezones import load_zone

DEFAULT_SHELL = "/bin/sh"
NAME_PREFIX = "crontab-"
"""Every imported job's name starts so: ``cronwheel jobs list --name-prefix crontab-``."""
_SLUG_LENGTH = 24
_ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_ENTRY = re.compile(r"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)(?:\s+(.*))?$")
_MACRO = re.compile(r"^(@\S+)(?:\s+(.*))?$")
_USER_FIELD = re.compile(r"^(\S+)(?:\s+(.*))?$")
# What useradd and cron accept as a login name (a trailing $ is a Samba machine account).
USER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")
_DIRECTORIES = re.compile(r"(?<![\w.~-])[~.]*/(?:[\w.-]+/)*")
# Cron's own variables that cronwheel cannot honour: the line is skipped, with this reason.
_SKIPPED = {
    "PATH": "the worker's operator sets PATH (it decides which executables run);"
    " write commands by absolute path or ask the operator",
    "MAILTO": "cronwheel does not mail output: each attempt keeps it (cronwheel runs"
    " get RUN_ID); a job's notify calls a URL when a run fails",
    "MAILFROM": "cronwheel does not mail output",
}


@dataclass(frozen=True)
class Entry:
    """One crontab entry as a job: its line, the cron expression and zone it fires on,
    the command (``%`` handled) and what the crontab gave it to run with."""

    line: int
    cron: str
    timezone: str
    command: str
    stdin: str | None
    shell: str
    env: dict[str, str]
    name: str
    user: str | None = None
    """A system crontab's user field (decision 0052, addendum); None in a user's crontab."""

    def argv(self) -> list[str]:
        """The command as cron runs it: ``SHELL -c COMMAND``. With text after a ``%``,
        that text is the command's stdin, piped in by a shell of its own (the text and
        the command are arguments of it, so neither is quoted into the other)."""
        if self.stdin is None:
            return [self.shell, "-c", self.command]
        pipe = 'printf %s "$1" | "$0" -c "$2"'
        return [self.shell, "-c", pipe, self.shell, self.stdin, self.command]

    def spec(self, *, pool: str, timeout_seconds: float) -> dict[str, Any]:
        """The job to create; its payload carries a fingerprint of everything else, by
        which a re-import knows the job is unchanged (env values come back masked)."""
        action: dict[str, Any] = {
            "type": "command",
            "argv": self.argv(),
            "timeout_seconds": timeout_seconds,
        }
        if self.env:
            action["env"] = dict(self.env)
        body: dict[str, Any] = {
            "name": self.name,
            "schedule": {"kind": "cron", "cron": self.cron, "timezone": self.timezone},
            "action": action,
            "pool": pool,
        }
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        body["payload"] = {"imported_from": "crontab", "fingerprint": digest[:16]}
        if self.user is not None:  # shown with the job, for whoever wonders whose it was
            body["payload"]["user"] = self.user
        return body


@dataclass(frozen=True)
class Notice:
    """A line that was read but not imported as it is, and why."""

    line: int
    message: str


@dataclass
class Crontab:
    entries: list[Entry] = field(default_factory=list)
    warnings: list[Notice] = field(default_factory=list)
    other_users: dict[str, list[int]] = field(default_factory=dict)
    """In a system crontab, the lines of users other than the one imported, by user."""


class CrontabError(ValueError):
    """The crontab holds lines cronwheel cannot import: every one, by line number."""

    def __init__(self, problems: list[Notice]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"line {p.line}: {p.message}" for p in problems))


def split_percent(text: str) -> tuple[str, str | None]:
    """The command and its stdin as cron (Vixie, cronie) makes them: the first ``%`` not
    escaped by a backslash ends the command; after it, ``%`` is a newline. ``\\%`` is a
    ``%`` in both parts; any other backslash is kept as it is."""
    command: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] == "%":
            command.append("%")
            i += 2
            continue
        if char == "%":
            return "".join(command), _stdin(text[i + 1 :])
        command.append(char)
        i += 1
    return "".join(command), None


def _stdin(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        out.append("\n" if char == "%" else char)
        i += 1
    return "".join(out)


def job_name(command: str, taken: dict[str, int], user: str | None = None) -> str:
    """``crontab-`` + a slug of the command (before any ``%``) + 8 hex digits of the hash
    of the whole command, stdin text included: the same command
    gives the same name at every import, whatever its schedule (a changed schedule
    updates its job). The same command on several lines: ``-2``, ``-3``… in file order.
    A system crontab's entry: the slug starts with its user, who is hashed too (root's
    and www-data's ``backup.sh`` are two jobs)."""
    words = _DIRECTORIES.sub("", split_percent(command)[0].lower())
    if user is not None:
        words = f"{user.lower()} {words}"
    slug = re.sub(r"[^a-z0-9]+", "-", words).strip("-")[:_SLUG_LENGTH].strip("-") or "command"
    hashed = command if user is None else f"{user}\n{command}"
    name = f"{NAME_PREFIX}{slug}-{hashlib.sha256(hashed.encode()).hexdigest()[:8]}"
    taken[name] = taken.get(name, 0) + 1
    return name if taken[name] == 1 else f"{name}-{taken[name]}"


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_crontab(text: str, *, timezone: str = "UTC", system_user: str | None = None) -> Crontab:
    """The entries of a user's crontab, in file order; ``timezone`` is the zone of the
    entries before any ``CRON_TZ``/``TZ`` line. With ``system_user``, the text is a system
    crontab (``/etc/crontab``, ``/etc/cron.d/*``: a user field after the five time
    fields) and only that user's entries are read; the others' lines are in
    ``other_users``, with a warning each. Raises :class:`CrontabError` naming every line it
    cannot import."""
    result = Crontab()
    problems: list[Notice] = []
    env: dict[str, str] = {}
    shell = DEFAULT_SHELL
    zone = timezone
    taken: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        setting = _ENV_LINE.match(line)
        if setting:
            name, value = setting.group(1), _unquote(setting.group(2))
            outcome = _setting(name, value)
            if isinstance(outcome, InvalidInput):
                problems.append(Notice(number, f"{name}: {outcome.reason}"))
            elif outcome is not None:
                result.warnings.append(Notice(number, f"{name} is not imported: {outcome}"))
            elif name == "SHELL":
                shell = value
            if name in ("CRON_TZ", "TZ") and not isinstance(outcome, InvalidInput):
                zone = value
            if name in ("CRON_TZ", "SHELL") or outcome is not None:
                continue
            env = {**env, name: value}
            continue
        try:
            cron, rest = _schedule(line)
            user, rest = (None, rest) if system_user is None else _user(rest)
        except InvalidInput as exc:
            problems.append(Notice(number, exc.reason))
            continue
        if user is not None and user != system_user:
            result.other_users.setdefault(user, []).append(number)
            result.warnings.append(
                Notice(
                    number,
                    f"runs as {user!r}, not imported (--as-user {system_user}): import"
                    f" {user}'s lines with --as-user {user}, into a pool whose workers run"
                    f" as {user}",
                )
            )
            continue
        command, stdin = split_percent(rest)
        if not command.strip():
            problems.append(Notice(number, "the command is empty (nothing before its '%')"))
            continue
        name = job_name(rest, taken, user)
        result.entries.append(Entry(number, cron, zone, command, stdin, shell, env, name, user))
    if problems:
        raise CrontabError(problems)
    return result


def _setting(name: str, value: str) -> InvalidInput | str | None:
    """What a ``NAME=value`` line is: an error, a reason to skip it, or None (kept)."""
    if name in _SKIPPED:
        return _SKIPPED[name]
    if name in ("CRON_TZ", "TZ"):
        try:
            load_zone(value)
        except InvalidInput as exc:
            return InvalidInput(name, exc.reason)
        return None
    if name == "SHELL":
        if not value.startswith("/"):
            return InvalidInput(name, f"{value!r} is not an absolute path (/bin/bash)")
        return None
    return refused_env_name(name)


def _schedule(line: str) -> tuple[str, str]:
    """The five-field expression of an entry and the rest of its line."""
    if line.startswith("@"):
        found = _MACRO.match(line)
        assert found is not None  # "@" then anything matches
        word, rest = found.group(1), found.group(2) or ""
        if word.lower() == "@reboot":
            raise InvalidInput(
                "schedule",
                "@reboot is not imported: cronwheel's jobs run on a schedule, not when a"
                " machine starts (start it from the machine's init system, e.g. a systemd"
                " unit)",
            )
        expression = MACROS.get(word.upper())
        if expression is None:
            raise InvalidInput(
                "schedule",
                f"unknown macro {word!r} (expected @yearly, @annually, @monthly, @weekly,"
                " @daily, @midnight or @hourly)",
            )
    else:
        found = _ENTRY.match(line)
        if found is None:
            raise InvalidInput(
                "schedule",
                "is neither NAME=value nor five time fields and a command"
                " (minute hour day-of-month month day-of-week command)",
            )
        expression, rest = " ".join(found.groups()[:5]), found.group(6) or ""
        try:
            validate_cron(expression)
        except InvalidInput as exc:
            raise InvalidInput("schedule", f"{expression!r}: {exc}") from None
    if not rest.strip():
        raise InvalidInput("schedule", f"{expression!r} has no command after it")
    return expression, rest.strip()


def _user(rest: str) -> tuple[str, str]:
    """A system crontab entry's user and command (the text after the time fields)."""
    found = _USER_FIELD.match(rest)
    assert found is not None  # _schedule made sure there is text
    user, command = found.group(1), (found.group(2) or "").strip()
    if not USER_NAME.match(user):
        raise InvalidInput(
            "user",
            f"{user!r} is not a user name: a system crontab's sixth field is the user the"
            " command runs as (is this a user's crontab? then leave out --system)",
        )
    if not command:
        raise InvalidInput("user", f"the entry of {user!r} has no command after the user")
    return user, command


def check_specs(specs: list[tuple[int, dict[str, Any]]]) -> list[Notice]:
    """Each spec validated as the API would: the problems, by line."""
    problems = []
    for number, spec in specs:
        try:
            JobSpec.parse(spec)
        except InvalidInput as exc:
            problems.append(Notice(number, f"{exc.field}: {exc.reason}"))
    return problems
