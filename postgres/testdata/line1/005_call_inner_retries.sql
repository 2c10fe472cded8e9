-- The requests the agent retried by itself within a call (retries Purser
-- could not switch off in its CLI), shown in BUDGET.md.
ALTER TABLE calls ADD COLUMN inner_retries INTEGER NOT NULL DEFAULT 0;
