-- Running totals of the usage ledger, per task and per run, kept in the same
-- transaction as each append, so reading a budget's status costs the same
-- after ten events as after a million.
CREATE TABLE usage_totals (
    scope      TEXT NOT NULL,   -- 'task' or 'run'
    id         TEXT NOT NULL,
    usd_nanos  INTEGER NOT NULL DEFAULT 0,
    tokens     INTEGER NOT NULL DEFAULT 0,
    iterations INTEGER NOT NULL DEFAULT 0,
    reported   INTEGER NOT NULL DEFAULT 0,
    estimated  INTEGER NOT NULL DEFAULT 0,
    unknown    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, id)
);

INSERT INTO usage_totals (scope, id, usd_nanos, tokens, iterations, reported, estimated, unknown)
SELECT 'task', task_id,
       SUM(CASE WHEN cost_source IN ('reported', 'estimated') THEN usd_nanos ELSE 0 END),
       SUM(input_tokens + output_tokens), SUM(iteration_end),
       SUM(cost_source = 'reported'), SUM(cost_source = 'estimated'), SUM(cost_source = 'unknown')
FROM usage GROUP BY task_id;

INSERT INTO usage_totals (scope, id, usd_nanos, tokens, iterations, reported, estimated, unknown)
SELECT 'run', run_id,
       SUM(CASE WHEN cost_source IN ('reported', 'estimated') THEN usd_nanos ELSE 0 END),
       SUM(input_tokens + output_tokens), SUM(iteration_end),
       SUM(cost_source = 'reported'), SUM(cost_source = 'estimated'), SUM(cost_source = 'unknown')
FROM usage WHERE run_id != '' GROUP BY run_id;
