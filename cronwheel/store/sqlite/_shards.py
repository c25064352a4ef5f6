"""Shard leases on SQLite: one writer at a time makes every step atomic already."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from cronwheel.core.model import ShardGuard, ShardLease
from cronwheel.store.sqlite import _rows as rows


def acquire(
    c: sqlite3.Connection, holder: str, shards: Sequence[int], now: int, until: int
) -> list[ShardLease]:
    for shard in shards:
        c.execute(
            "INSERT INTO shard_leases (shard, holder, epoch, expires_at) VALUES (?, ?, 1, ?)"
            " ON CONFLICT (shard) DO UPDATE SET"
            " epoch = CASE WHEN shard_leases.holder IS excluded.holder THEN shard_leases.epoch"
            " ELSE shard_leases.epoch + 1 END,"
            " holder = excluded.holder, expires_at = excluded.expires_at"
            " WHERE shard_leases.holder IS NULL OR shard_leases.holder = excluded.holder"
            " OR shard_leases.expires_at <= ?",
            (shard, holder, until, now),
        )
    return held(c, holder, shards)


def held(c: sqlite3.Connection, holder: str, shards: Sequence[int]) -> list[ShardLease]:
    marks = ",".join("?" * len(shards))
    found = c.execute(
        f"SELECT * FROM shard_leases WHERE holder = ? AND shard IN ({marks}) ORDER BY shard",
        (holder, *shards),
    )
    return [_lease(r) for r in found]


def release(c: sqlite3.Connection, holder: str, shards: Sequence[int]) -> None:
    marks = ",".join("?" * len(shards))
    c.execute(
        "UPDATE shard_leases SET holder = NULL, expires_at = NULL"
        f" WHERE holder = ? AND shard IN ({marks})",
        (holder, *shards),
    )


def all_leases(c: sqlite3.Connection) -> list[ShardLease]:
    return [_lease(r) for r in c.execute("SELECT * FROM shard_leases ORDER BY shard")]


def valid_shards(c: sqlite3.Connection, guard: ShardGuard, now: int) -> set[int]:
    """The guard's shards still leased to its holder, under its epoch, unexpired."""
    found = c.execute(
        "SELECT shard, epoch FROM shard_leases WHERE holder = ? AND expires_at > ?",
        (guard.holder, now),
    )
    return {r["shard"] for r in found if guard.epochs.get(r["shard"]) == r["epoch"]}


def _lease(row: sqlite3.Row) -> ShardLease:
    return ShardLease(row["shard"], row["holder"], row["epoch"], rows.dt_or_none(row["expires_at"]))
