-- Who in the agent spent each event: '' for the main agent, else the
-- sub-agent its CLI named (Claude Code's parent_tool_use_id). The per-call
-- totals are kept per call, model and agent, so BUDGET.md can break spend
-- down by sub-agent at a cost that grows with the calls, not the events;
-- SQLite cannot change a primary key in place, so the table is rebuilt.
ALTER TABLE usage ADD COLUMN agent TEXT NOT NULL DEFAULT '';

CREATE TABLE call_totals_017 (
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
);
INSERT INTO call_totals_017 (call_id, model, agent, task_id, iteration, kind, first_seq, usd_nanos, tokens, cached, reported, estimated, unknown, list_usd_nanos, list_events)
SELECT call_id, model, '', task_id, iteration, kind, first_seq, usd_nanos, tokens, cached, reported, estimated, unknown, list_usd_nanos, list_events
FROM call_totals;
DROP TABLE call_totals;
ALTER TABLE call_totals_017 RENAME TO call_totals;
CREATE INDEX call_totals_task ON call_totals (task_id, first_seq);
