"""Log lines: one format for every logger of a process (cronwheel's, uvicorn's, a user's
handlers'), text or JSON, carrying the ids of the run being executed, never a secret.

A worker sets :data:`current_run` around each run's execution (the run's own asyncio task,
and the thread a sync handler runs in), so every record logged while the run executes —
the worker's attempt-end line, httpx's, a user's ``logging.getLogger(...).info()`` inside a
handler — carries ``run_id``, ``job_id``, ``tenant``, ``attempt``, ``fence`` and ``pool``
in JSON. Setting it costs one context-variable write per run: the fields are read from the
run only when a record is formatted. docs/observability.md ("Logs") lists every field.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import traceback
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final, Protocol
from urllib.parse import unquote_plus

from cronwheel.core.text import escape_controls
from cronwheel.security.redact import is_secret_header, redact

FORMATS: Final = ("text", "json")
LEVELS: Final = ("debug", "info", "warning", "error", "critical")

RUN_FIELDS: Final = ("run_id", "job_id", "tenant", "attempt", "fence", "pool")
"""The fields a record logged during a run's execution carries, in this order."""

# Libraries that log a line per HTTP request at info (httpx: every webhook sent, every
# SDK call): at info they would double the worker's own attempt-end line. They follow
# the level only at debug.
_CHATTY: Final = ("httpx", "httpcore")

# Loggers that follow --log-level exactly: ours, and uvicorn's error and access logs.
_OURS: Final = ("cronwheel", "uvicorn")


class RunIds(Protocol):
    """What a record needs of the run being executed (a :class:`cronwheel.core.model.Run`)."""

    @property
    def id(self) -> int: ...
    @property
    def job_id(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def fence(self) -> int: ...
    @property
    def pool(self) -> str: ...


current_run: ContextVar[RunIds | None] = ContextVar("cronwheel_current_run", default=None)
"""The run whose execution this code is part of, if any (set by the worker)."""


def run_fields(run: RunIds) -> dict[str, Any]:
    """The log fields of ``run``, for ``extra=`` where no run is current (a heartbeat)."""
    return {
        "run_id": run.id,
        "job_id": run.job_id,
        "tenant": run.tenant_id,
        "attempt": run.attempt,
        "fence": run.fence,
        "pool": run.pool,
    }


# Every attribute a LogRecord has of its own; anything else on a record came from extra=.
_RECORD_ATTRS: Final = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's message again, with ANSI colours
}


def _timestamp(record: logging.LogRecord) -> str:
    """``2030-01-01T00:00:00.123Z``: the record's time to the millisecond, in UTC."""
    global _second
    frac, whole = math.modf(record.created)
    micros = round(frac * 1e6)  # as datetime.fromtimestamp rounds
    if frac < 0 or micros >= 1_000_000:  # before 1970, or a second's last half microsecond
        when = datetime.fromtimestamp(record.created, UTC)
        return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    seconds, ms = int(whole), micros // 1000
    cached_at, prefix = _second
    if seconds != cached_at:
        # A worker logs thousands of lines a second: the date and time up to the second
        # are formatted once per second, not once per line.
        prefix = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (seconds, prefix)
    return f"{prefix}.{ms:03d}Z"


_second: tuple[int, str] = (-1, "")
"""The last second :func:`_timestamp` formatted, and its text."""


def _clean(value: Any) -> Any:
    """``value`` as JSON can hold it, every string in it redacted."""
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_clean(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return redact(str(value))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``message``, the current
    run's ids, the record's ``extra=`` fields, and ``exception`` (a traceback), all
    redacted."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        run = current_run.get()
        if run is not None:
            line.update(run_fields(run))
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and not key.startswith("_"):
                line[key] = _clean(value)
        if record.name == "uvicorn.access":
            line.update(_access_fields(record))
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        if record.stack_info:
            line["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False, default=str)


def _access_fields(record: logging.LogRecord) -> dict[str, Any]:
    """uvicorn's access line as fields: '%s - "%s %s HTTP/%s" %d' with (client, method,
    path, http version, status)."""
    args = record.args
    if not isinstance(args, tuple) or len(args) != 5:
        return {}
    client, method, path, _, status = args
    return {
        "client": redact(str(client)),
        "method": str(method),
        "path": redact(str(path)),
        "status": status,
    }


class TextFormatter(logging.Formatter):
    """``TS LEVEL LOGGER: MESSAGE``, one line per record: a message's line breaks and a
    traceback's are written as ``\\n``, so that ``grep`` and line-based collectors see
    one record per line, and every other control character (ESC…), bidi control and
    line separator as an escape too (``\\x1b``, ``\\u202e``), whatever value brought it
    (a name stored before names were checked, a target's error text). Redacted."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            text += " | " + self.formatException(record.exc_info)
        if record.stack_info:
            text += " | " + self.formatStack(record.stack_info)
        return escape_controls(redact(text))


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``--log-format`` ``fmt`` (text or json)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format: {fmt!r} is not one of {', '.join(FORMATS)}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


def level_number(level: str | int) -> int:
    """``info`` → logging.INFO."""
    if isinstance(level, int):
        return level
    number = logging.getLevelNamesMapping().get(level.upper())
    if number is None:
        raise ValueError(f"log level: {level!r} is not one of {', '.join(LEVELS)}")
    return number


_json = False


def json_lines() -> bool:
    """Whether this process logs JSON (then even its last error is a JSON line)."""
    return _json


def log_exit(message: str, exit_code: int, **fields: Any) -> None:
    """Log the error that stops this process (at error, on ``cronwheel``, with its
    ``exit_code``), whatever the level: it is the answer to why the process exited, which
    ``--log-level critical`` must not hide any more than it hides the text format's."""
    logger = logging.getLogger("cronwheel")
    extra = {"exit_code": exit_code, **fields}
    record = logger.makeRecord(logger.name, logging.ERROR, "", 0, message, (), None, extra=extra)
    logger.handle(record)  # handle(), unlike error(), does not look at the level


def configure(fmt: str = "text", level: str | int = "info") -> None:
    """Send every logger's records to stderr in one format from ``level`` up (httpx's
    request lines only at debug), replacing any handler set before; a crash's traceback
    goes the same way."""
    number = level_number(level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(number)
    for name in _OURS:
        logging.getLogger(name).setLevel(number)
    chatty = number if number <= logging.DEBUG else max(number, logging.WARNING)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(chatty)
    sys.excepthook = _json_excepthook if fmt == "json" else _text_excepthook
    hide_query_values()
    global _json
    _json = fmt == "json"


ACCESS_LOGGER: Final = "uvicorn.access"


_SECRET_QUERY_NAMES: Final = frozenset(
    {"sig", "code", "session", "sid", "jwt", "hmac", "otp", "pass", "pwd", "state"}
)
"""Query parameters holding a credential beside those :func:`is_secret_header` names
(token, key, secret, password, signature, auth, credential, cookie…): ``?sig=``,
an OAuth ``?code=`` or ``?state=``."""


def is_secret_query_name(name: str) -> bool:
    """Whether a query parameter's value may be a credential (its name decoded first:
    ``%74oken`` is ``token``). Broad on purpose, as for headers."""
    decoded = unquote_plus(name).strip().lower()
    return is_secret_header(decoded) or decoded in _SECRET_QUERY_NAMES


def without_query_values(path: str) -> str:
    """``path`` with the value of every secret-looking query parameter replaced by
    ``***`` (:func:`is_secret_query_name`; a bare value without a name too): a token in
    a query string (``?token=…``, a signed link) never reaches an access log line, and
    ``?name=nightly&limit=5`` stays readable."""
    base, mark, query = path.partition("?")
    if not mark:
        return path
    shown = []
    for pair in query.split("&"):
        name, equals, _ = pair.partition("=")
        if not equals:
            shown.append("***" if pair else "")
        elif is_secret_query_name(name):
            shown.append(f"{name}=***")
        else:
            shown.append(pair)
    return f"{base}?{'&'.join(shown)}"


class AccessQueryFilter(logging.Filter):
    """Rewrites uvicorn's access records (client, method, path, version, status) so
    that their path shows no query value, whatever formatter prints them."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], without_query_values(args[2]), args[3], args[4])
        return True


_ACCESS_FILTER: Final = AccessQueryFilter()


def hide_query_values() -> None:
    """Install :class:`AccessQueryFilter` on uvicorn's access logger (idempotent)."""
    logging.getLogger(ACCESS_LOGGER).addFilter(_ACCESS_FILTER)


def _text_excepthook(
    kind: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    # A crash (a bug) still prints its traceback, but never a secret.
    sys.stderr.write(redact("".join(traceback.format_exception(kind, exc, tb))))


def _json_excepthook(
    kind: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    # In JSON, even a crash is one parseable line.
    logging.getLogger("cronwheel").critical("crashed: %s", exc, exc_info=(kind, exc, tb))


__all__ = [
    "FORMATS",
    "LEVELS",
    "RUN_FIELDS",
    "JsonFormatter",
    "RunIds",
    "TextFormatter",
    "configure",
    "current_run",
    "formatter",
    "hide_query_values",
    "json_lines",
    "level_number",
    "log_exit",
    "run_fields",
    "without_query_values",
]
