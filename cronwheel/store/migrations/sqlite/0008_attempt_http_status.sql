-- cronwheel SQLite schema, step 8: the HTTP status a webhook target answered, kept on
-- the attempt (the dashboard and the API show it; before, it was only in the error text,
-- and a success recorded none). NULL for handlers and for requests that got no answer.

ALTER TABLE attempts ADD COLUMN http_status INTEGER;
