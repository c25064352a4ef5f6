"""The SQLite file's owner lock of ``cronwheel dev``: one holder, and the next one learns
who held it when that holder died."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cronwheel.store.sqlite.owner import FileInUse, take_owner_lock


def test_one_holder_at_a_time_and_the_next_learns_the_dead_ones_workers(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "dev.db")
    first = take_owner_lock(db)
    assert (first.previous, first.previous_pid) == ([], None)
    first.record(["w-1"])
    with pytest.raises(FileInUse, match=rf"in use by another cronwheel dev \(pid {os.getpid()}\)"):
        take_owner_lock(db)
    os.close(first.fd)  # dies without a clean stop: the OS drops the lock, the file stays
    second = take_owner_lock(db)
    assert (second.previous, second.previous_pid) == (["w-1"], os.getpid())
    second.record(["w-2"])
    second.release()  # a clean stop leaves nothing to rescue
    third = take_owner_lock(db)
    assert third.previous == []
    third.release()
    assert Path(f"{db}.lock").exists()
