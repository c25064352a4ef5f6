"""Emptying a test database between tests, cheaply.

``TRUNCATE`` of every table gives each a new file and fsyncs them at commit: 65 ms on a
quiet machine and 275 to 434 ms on a busy one, paid by every PostgreSQL test. Most tests
touch a few of the tables, so the reset truncates only the tables whose file is not
empty: a table written since its last truncate, whether or not it still holds rows.
Deleting rows instead would be cheaper still, but leaves dead tuples and index entries
behind on a server without autovacuum (this machine's), and the next test's claims would
walk them: a test that bounds the work of a claim then fails.

``tenants`` is the exception: every table names it, so truncating it would cascade to
all of them. Its rows are deleted instead (after the tables that refer to them are
emptied), and the default tenant is put back as a fresh database has it.
"""

from __future__ import annotations

# One round trip. Partitions of the history tables are each test's own: dropped.
RESET = r"""
DO $reset$
DECLARE
    t record;
    written text[] := '{}';
BEGIN
    FOR t IN
        SELECT c.relname FROM pg_inherits AS i
        JOIN pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent IN ('run_history'::regclass, 'attempt_history'::regclass)
          AND c.relname ~ '_history_p\d{8}t\d{6}_\d{8}t\d{6}$'
    LOOP
        EXECUTE format('DROP TABLE %I', t.relname);
    END LOOP;
    FOR t IN
        SELECT c.relname FROM pg_class AS c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
          AND c.relname NOT IN ('schema_migrations', 'tenants')
          AND pg_relation_size(c.oid) > 0
    LOOP
        written := written || quote_ident(t.relname);
    END LOOP;
    IF cardinality(written) > 0 THEN
        EXECUTE 'TRUNCATE ' || array_to_string(written, ', ') || ' RESTART IDENTITY CASCADE';
    END IF;
    DELETE FROM tenants;
    INSERT INTO tenants (id, name, created_at) VALUES ('default', 'default', now());
END
$reset$"""
