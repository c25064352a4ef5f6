"""The cluster store: PostgreSQL through an asyncpg pool, LISTEN/NOTIFY for wake-ups."""

from cronwheel.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
