"""Shard leases on PostgreSQL: statements, and the guard taken inside a transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import asyncpg

from cronwheel.core.model import ShardGuard, ShardLease

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]

# A lease is taken if it is free, expired or ours; a change of holder bumps the epoch.
# Rows are taken in shard order so two schedulers claiming overlapping sets cannot
# deadlock.
ACQUIRE = """
INSERT INTO shard_leases AS l (shard, holder, epoch, expires_at)
SELECT s, $1, 1, $3::timestamptz + make_interval(secs => $4)
FROM unnest($2::int[]) AS s ORDER BY s
ON CONFLICT (shard) DO UPDATE SET
    epoch = CASE WHEN l.holder IS NOT DISTINCT FROM excluded.holder THEN l.epoch
                 ELSE l.epoch + 1 END,
    holder = excluded.holder,
    expires_at = excluded.expires_at
WHERE l.holder IS NULL OR l.holder = excluded.holder OR l.expires_at <= $3
"""

HELD = "SELECT * FROM shard_leases WHERE holder = $1 AND shard = ANY($2::int[]) ORDER BY shard"

RELEASE = """
UPDATE shard_leases SET holder = NULL, expires_at = NULL
WHERE holder = $1 AND shard = ANY($2::int[])
"""

ALL = "SELECT * FROM shard_leases ORDER BY shard"

# FOR SHARE: a takeover (an UPDATE of the lease) waits until the guarded write commits,
# so a former owner's write can never land after the new owner has started.
VALID = """
SELECT shard, epoch FROM shard_leases
WHERE holder = $1 AND shard = ANY($2::int[]) AND expires_at > clock_timestamp()
ORDER BY shard FOR SHARE
"""


async def valid_shards(conn: Connection, guard: ShardGuard) -> set[int]:
    found = await conn.fetch(VALID, guard.holder, list(guard.epochs))
    return {r["shard"] for r in found if guard.epochs.get(r["shard"]) == r["epoch"]}


def lease(row: asyncpg.Record) -> ShardLease:
    return ShardLease(row["shard"], row["holder"], row["epoch"], row["expires_at"])
