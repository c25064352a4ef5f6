"""The ``cronwheel`` command for the CLI's end-to-end tests: in the test process, or as a
real process, against the same real ``cronwheel api``.

A real ``python -m cronwheel`` costs an interpreter and the CLI's imports (0.3 to 1 s on
CI's 2-core machine) per call, and the CLI tests made hundreds of calls: most of them
check what a command prints and its exit code, which click's runner gives as well, in
this process, with the same arguments, environment, stdin and stdout (a pipe, or a
terminal of a given width). Real processes remain where the process itself is the
point: the entry point (``python -m cronwheel``, once per command family), a real pipe
and a real pseudo-terminal at 80 columns (decision 0038).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from click.testing import CliRunner

from cronwheel.cli import main
from cronwheel.observability import logs
from cronwheel.security import redact
from tests.e2e.procs import REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

_KEPT = ("PATH",)
"""The only variables of the test process a command sees: as the real process, which is
started with ``PATH`` and what the test gives."""


def run(
    args: tuple[str, ...] | list[str],
    env: Mapping[str, str],
    *,
    stdin: str | None = None,
    columns: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """``cronwheel ARGS`` in this process, seeing ``env`` (and ``PATH``) only: on stdout,
    a pipe, or with ``columns`` a terminal that wide (as rich decides it: stdout and
    stderr are then read together as ``stdout``, without colours, as on a screen). Its
    exit code, stdout and stderr, as :func:`subprocess.run` gives them.

    A crash (an exception click does not turn into an exit code) is raised here, where a
    real process would print its traceback: the test fails on it either way."""
    environ: dict[str, str | None] = {name: None for name in os.environ if name not in _KEPT}
    environ |= env
    if columns is not None:
        environ |= {"COLUMNS": str(columns), "LINES": "50", "TTY_COMPATIBLE": "1"}
    with _process_state_restored():
        result = CliRunner().invoke(
            main,
            list(args),
            input=stdin,
            env=environ,
            catch_exceptions=False,
            prog_name="python -m cronwheel",  # as click names the real process
        )
    if columns is None:
        return subprocess.CompletedProcess(
            list(args), result.exit_code, result.stdout, result.stderr
        )
    screen = ANSI.sub("", result.output)
    return subprocess.CompletedProcess(list(args), result.exit_code, screen, "")


def real(
    args: tuple[str, ...] | list[str], env: Mapping[str, str], *, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m cronwheel ARGS`` as a real process, with its output in a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "cronwheel", *args],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def real_on_terminal(
    args: tuple[str, ...] | list[str], env: Mapping[str, str], columns: int
) -> tuple[int, str]:
    """``python -m cronwheel ARGS`` with its stdout and stderr on a pseudo-terminal of
    ``columns`` columns, as a person at a terminal runs it: its exit code and what the
    screen shows."""
    primary, secondary = os.openpty()
    screen_env = {"COLUMNS": str(columns), "LINES": "50", "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronwheel", *args],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **env, **screen_env},
        stdout=secondary,
        stderr=subprocess.STDOUT,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    code = proc.wait(timeout=60)
    return code, ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


@contextmanager
def _process_state_restored() -> Iterator[None]:
    """What a command sets up for its process, put back after it: its logging (every
    command replaces the root logger's handlers, pytest's among them, with one writing
    to its stderr), its crash hook, and the secrets it was told (masked in every line
    it writes)."""
    manager = logging.Logger.manager
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    levels = {
        name: logger.level
        for name, logger in manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    hook = sys.excepthook
    json_lines = logs.json_lines()
    # The registry has no public reset: the command registers into a copy, and the
    # original comes back (the cache of its sorted form is keyed by the set's identity).
    secrets = redact._secrets
    redact._secrets = set(secrets)
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(root_level)
        for name, logger in list(manager.loggerDict.items()):
            if isinstance(logger, logging.Logger):
                logger.setLevel(levels.get(name, logging.NOTSET))
        sys.excepthook = hook
        logs._json = json_lines
        redact._secrets = secrets
