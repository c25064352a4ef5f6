-- cronwheel SQLite schema, step 6: a job remembers the W3C traceparent of the API request
-- that created it, so that each attempt's span links to it (docs/observability.md#traces).
-- NULL: the request carried none and the API did not trace.

ALTER TABLE jobs ADD COLUMN traceparent TEXT;
