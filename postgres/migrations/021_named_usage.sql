-- A budgets database apart from the project's (the user-level default, or
-- one named by --budgets-db, PURSER_BUDGETS_DB or budgets:) keeps no ledger
-- of the runs drawing from its budgets: their projects' databases do. Each
-- ledger entry of such a run is copied here, keyed by the run (qualified by
-- its project) and the entry's idempotency key, so that a retry or a resume
-- counts once. A named budget's spend is this table's and the ledger's of
-- the runs drawing from it; a database that is both (a PostgreSQL project's)
-- has no copy here.
CREATE TABLE named_usage (
    run_id    TEXT    NOT NULL,
    idem_key  TEXT    NOT NULL,
    usd_nanos BIGINT NOT NULL,
    tokens    BIGINT NOT NULL,
    at        BIGINT NOT NULL,
    PRIMARY KEY (run_id, idem_key)
);
CREATE INDEX named_usage_run_at ON named_usage (run_id, at);
