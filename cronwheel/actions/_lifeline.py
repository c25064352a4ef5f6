"""The supervisor between a worker and a command: it outlives neither.

Run by the worker (cronwheel.actions.command) as ``python -I -S _lifeline.py FD GRACE
EXECUTABLE ARGV...``, in a session of its own, with the read end of a pipe (the
*lifeline*) at FD; the worker holds the write end. It starts the command in a process
group of its own and waits. When the lifeline breaks, because the worker closed it (a
timeout, a cancel, a lost lease) or because the worker died (SIGKILL, OOM: the kernel
closes its end), it stops the command's whole group: SIGTERM, then SIGKILL after GRACE
seconds. When the command exits first, what it left in its group is stopped the same
way. It exits as the command did (re-raising the signal that ended it), so the worker
reads the command's own exit status.

Standard library only, and started with ``-I -S``: it costs the command a few
milliseconds, not an import of cronwheel. As a child subreaper (Linux), it reaps the
group's orphans, so that an empty group is seen as empty.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36
_POLL = 0.05
"""How often (seconds) the group is looked at while it is given its grace: reaping and
``killpg(pgid, 0)`` have no event to wait on."""
CANNOT_RUN = 127
"""The exit status when the command cannot be started (as a shell's)."""


def _subreaper() -> None:
    with contextlib.suppress(Exception):  # not Linux: orphans go to init, as before
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


class _Group:
    """The command's process group, led by the command (its pgid is the command's pid)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.status: int | None = None
        """The command's exit status once reaped (negative: the signal that ended it)."""

    def reap(self) -> None:
        """Reap every child that has exited: the command, and its orphans (a subreaper
        inherits them); the command's status is kept."""
        while True:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.pid:
                self.status = os.waitstatus_to_exitcode(wstatus)

    def alive(self) -> bool:
        self.reap()
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def stop(self, grace: float) -> None:
        """SIGTERM to the group, then SIGKILL to whatever is left after ``grace`` s."""
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not self.alive():
                return
            time.sleep(_POLL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        while self.alive() and time.monotonic() < deadline + 5:
            time.sleep(_POLL)


def main(args: list[str]) -> int:
    fd, grace, executable, argv = int(args[0]), float(args[1]), args[2], args[3:]
    # The worker stops the command through the lifeline, never a signal to us: ignore the
    # terminal's, so that a ^C to a `cronwheel dev` in the foreground goes through it.
    # (A handler, not SIG_IGN: the command starts with the default dispositions.)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    _subreaper()
    try:
        # close_fds (the default): the lifeline is not the command's to hold.
        child = subprocess.Popen(argv, executable=executable, start_new_session=True)
    except OSError as exc:
        print(f"cronwheel: cannot run {argv[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return CANNOT_RUN
    group = _Group(child.pid)
    pidfd = os.pidfd_open(child.pid) if hasattr(os, "pidfd_open") else None
    watched = [fd] if pidfd is None else [fd, pidfd]
    while group.status is None:
        ready, _, _ = select.select(watched, [], [], None if pidfd is not None else _POLL)
        group.reap()
        if group.status is None and fd in ready and not os.read(fd, 1):
            break  # the lifeline broke: the worker wants the command stopped, or died
    # Stopped, or exited with work left in its group: nothing of it outlives the attempt.
    group.stop(grace)
    while group.status is None:  # SIGKILLed above: reaped at once
        group.reap()
        time.sleep(_POLL)
    if group.status < 0:  # ended by a signal: end the same way, for the worker to read
        with contextlib.suppress(OSError, ValueError):
            signal.signal(-group.status, signal.SIG_DFL)
        os.kill(os.getpid(), -group.status)
    return group.status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
