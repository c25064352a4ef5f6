-- Placeholder for step 9, which another branch adds: migrations are numbered without
-- gaps. Delete this file when that branch's 0009 is merged.
SELECT 1;
