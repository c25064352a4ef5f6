"""The owner of an SQLite file: proof that the ``cronwheel dev`` before us is gone.

A lease can only say "the owner has not been heard of for a while"; on a single machine
the OS can say more. ``cronwheel dev`` holds an exclusive ``flock`` on a side file,
``<db>.lock``, for its whole life, and writes its worker's id into it. The OS drops the
lock when the process ends, however it ends (kill -9 included), so a process that takes
the lock knows that every worker id the file names is dead, and can rescue their runs at
once instead of waiting out their leases.

The lock is on a side file, not on the database: SQLite takes POSIX ``fcntl`` locks on
the database and its WAL, and those are per process, so one lock of ours on the same file
could be silently dropped when SQLite closes a descriptor of it. ``flock`` on a separate
file shares nothing with SQLite's locking and works whatever the journal mode.

Only ``cronwheel dev`` takes the lock: ``cronwheel worker`` and ``cronwheel scheduler``
beside it on the same file are legitimate, keep their lease rules and are never rescued
by it (only the ids the dead ``dev`` wrote are).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass, field

from cronwheel.errors import Conflict


class FileInUse(Conflict):
    """Another live ``cronwheel dev`` holds the file's lock."""

    def __init__(self, db_path: str, holder: str) -> None:
        super().__init__(
            "--db",
            f"{db_path} is in use by another cronwheel dev ({holder}): stop it first,"
            " or give this one another --db",
        )
        self.db_path = db_path


@dataclass(slots=True)
class OwnerLock:
    """The held lock of one SQLite file; ``previous`` names the workers of the process
    that held it last, which is now provably gone."""

    path: str
    fd: int
    previous: list[str] = field(default_factory=list)
    previous_pid: int | None = None

    def record(self, worker_ids: list[str]) -> None:
        """Write who owns the file now, for the process that comes after us."""
        data = json.dumps({"pid": os.getpid(), "workers": worker_ids}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        """A clean stop: nothing of ours is left to rescue, so the file names nobody."""
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        os.close(self.fd)  # closing the descriptor drops the flock


def lock_path(db_path: str) -> str:
    return f"{db_path}.lock"


def take_owner_lock(db_path: str) -> OwnerLock:
    """Take the exclusive lock of ``db_path`` or raise :class:`FileInUse` at once."""
    path = lock_path(db_path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read(fd).get("pid")
        os.close(fd)
        raise FileInUse(db_path, f"pid {holder}" if holder else "pid unknown") from None
    except BaseException:
        os.close(fd)
        raise
    before = _read(fd)
    workers = before.get("workers")
    pid = before.get("pid")
    return OwnerLock(
        path,
        fd,
        previous=[w for w in workers if isinstance(w, str)] if isinstance(workers, list) else [],
        previous_pid=pid if isinstance(pid, int) else None,
    )


def _read(fd: int) -> dict[str, object]:
    """What the last holder wrote; nothing when it wrote nothing readable (it may have
    died mid-write, or predates the lock)."""
    try:
        data = json.loads(os.pread(fd, 65536, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


__all__ = ["FileInUse", "OwnerLock", "lock_path", "take_owner_lock"]
