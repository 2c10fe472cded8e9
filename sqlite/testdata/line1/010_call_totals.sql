-- Running totals per call and model, kept as the ledger grows, so that a
-- stopped task's BUDGET.md costs what its calls are, not its events.
CREATE TABLE call_totals (
    call_id    TEXT    NOT NULL,
    model      TEXT    NOT NULL,
    task_id    TEXT    NOT NULL,
    iteration  INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    first_seq  INTEGER NOT NULL,
    usd_nanos  INTEGER NOT NULL,
    tokens     INTEGER NOT NULL,
    cached     INTEGER NOT NULL,
    reported   INTEGER NOT NULL,
    estimated  INTEGER NOT NULL,
    unknown    INTEGER NOT NULL,
    PRIMARY KEY (call_id, model)
);
CREATE INDEX call_totals_task ON call_totals (task_id, first_seq);

INSERT INTO call_totals (call_id, model, task_id, iteration, kind, first_seq, usd_nanos, tokens, cached, reported, estimated, unknown)
SELECT call_id, model, task_id, MIN(iteration), MIN(kind), MIN(seq),
       SUM(CASE WHEN cost_source IN ('reported', 'estimated') THEN usd_nanos ELSE 0 END),
       SUM(input_tokens + output_tokens), SUM(cache_read),
       SUM(cost_source = 'reported'), SUM(cost_source = 'estimated'), SUM(cost_source = 'unknown') - SUM(settles_unknown)
FROM usage WHERE call_id != '' GROUP BY call_id, model;
