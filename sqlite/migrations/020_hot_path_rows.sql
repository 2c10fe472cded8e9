-- Fewer pages written per ledger append (issue 24: about ten WAL frames per
-- event, where a one-row transaction writes one). SQLite cannot change a
-- table's key in place, so both tables are rebuilt, with every row kept:
--   * usage loses AUTOINCREMENT: its seq is still the rowid, one more than the
--     largest, and the ledger never deletes a row, so seq still only grows;
--     an append no longer writes sqlite_sequence's page.
--   * call_totals is WITHOUT ROWID, stored in its primary key's b-tree: a
--     call's first event writes that one tree, not a table and its key's
--     index.
-- PostgreSQL's 020 keeps a run's holds summed beside its spend instead (its
-- pages are not SQLite's WAL frames).
CREATE TABLE usage_020 (
    seq             INTEGER PRIMARY KEY,
    idem_key        TEXT NOT NULL UNIQUE,
    task_id         TEXT NOT NULL,
    run_id          TEXT NOT NULL DEFAULT '',
    call_id         TEXT NOT NULL DEFAULT '',
    iteration       INTEGER NOT NULL DEFAULT 0,
    kind            TEXT NOT NULL DEFAULT '',
    model           TEXT NOT NULL DEFAULT '',
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_read      INTEGER NOT NULL DEFAULT 0,
    cache_write     INTEGER NOT NULL DEFAULT 0,
    reasoning       INTEGER NOT NULL DEFAULT 0,
    usd_nanos       INTEGER NOT NULL DEFAULT 0,
    cost_source     TEXT NOT NULL DEFAULT 'none',
    elapsed_ns      INTEGER NOT NULL DEFAULT 0,
    iteration_end   INTEGER NOT NULL DEFAULT 0,
    at              INTEGER NOT NULL,
    price_source    TEXT NOT NULL DEFAULT '',
    settles_unknown INTEGER NOT NULL DEFAULT 0,
    agent           TEXT NOT NULL DEFAULT ''
);
INSERT INTO usage_020 (seq, idem_key, task_id, run_id, call_id, iteration, kind, model, input_tokens, output_tokens, cache_read,
    cache_write, reasoning, usd_nanos, cost_source, elapsed_ns, iteration_end, at, price_source, settles_unknown, agent)
SELECT seq, idem_key, task_id, run_id, call_id, iteration, kind, model, input_tokens, output_tokens, cache_read,
    cache_write, reasoning, usd_nanos, cost_source, elapsed_ns, iteration_end, at, price_source, settles_unknown, agent
FROM usage;
DROP TABLE usage;
ALTER TABLE usage_020 RENAME TO usage;
CREATE INDEX usage_task ON usage (task_id, seq);
CREATE INDEX usage_run_at ON usage (run_id, at);

CREATE TABLE call_totals_020 (
    call_id        TEXT    NOT NULL,
    model          TEXT    NOT NULL,
    agent          TEXT    NOT NULL DEFAULT '',
    task_id        TEXT    NOT NULL,
    iteration      INTEGER NOT NULL,
    kind           TEXT    NOT NULL,
    first_seq      INTEGER NOT NULL,
    usd_nanos      INTEGER NOT NULL,
    tokens         INTEGER NOT NULL,
    cached         INTEGER NOT NULL,
    reported       INTEGER NOT NULL,
    estimated      INTEGER NOT NULL,
    unknown        INTEGER NOT NULL,
    list_usd_nanos INTEGER NOT NULL DEFAULT 0,
    list_events    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (call_id, model, agent)
) WITHOUT ROWID;
INSERT INTO call_totals_020 (call_id, model, agent, task_id, iteration, kind, first_seq, usd_nanos, tokens, cached, reported, estimated,
    unknown, list_usd_nanos, list_events)
SELECT call_id, model, agent, task_id, iteration, kind, first_seq, usd_nanos, tokens, cached, reported, estimated,
    unknown, list_usd_nanos, list_events
FROM call_totals;
DROP TABLE call_totals;
ALTER TABLE call_totals_020 RENAME TO call_totals;
CREATE INDEX call_totals_task ON call_totals (task_id, first_seq);
