-- Which process runs a task (host, pid and process start time), so that a
-- RUNNING task whose process died can be told apart from a live one.
ALTER TABLE tasks ADD COLUMN owner TEXT NOT NULL DEFAULT '';
