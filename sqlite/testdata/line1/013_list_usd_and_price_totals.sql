-- List-price dollars (usage on a flat-rate plan, cost_source 'list'), kept
-- apart from money spent in the running totals; no earlier event is 'list'.
ALTER TABLE usage_totals ADD COLUMN list_usd_nanos INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_totals ADD COLUMN list_events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE call_totals ADD COLUMN list_usd_nanos INTEGER NOT NULL DEFAULT 0;
ALTER TABLE call_totals ADD COLUMN list_events INTEGER NOT NULL DEFAULT 0;

-- What each price table (and its rates) priced, per task: the running sums of
-- the events whose price_source it is, so BUDGET.md and `purser status --json`
-- say where estimates came from at a cost that grows with the tables, not
-- with the ledger.
CREATE TABLE price_totals (
    task_id      TEXT    NOT NULL,
    price_source TEXT    NOT NULL,
    cost_source  TEXT    NOT NULL,
    first_seq    INTEGER NOT NULL,
    events       INTEGER NOT NULL,
    tokens       INTEGER NOT NULL,
    usd_nanos    INTEGER NOT NULL,
    PRIMARY KEY (task_id, price_source, cost_source)
);

INSERT INTO price_totals (task_id, price_source, cost_source, first_seq, events, tokens, usd_nanos)
SELECT task_id, price_source, cost_source, MIN(seq), COUNT(*), SUM(input_tokens + output_tokens),
       SUM(CASE WHEN cost_source = 'unknown' THEN 0 ELSE usd_nanos END)
FROM usage WHERE price_source != '' GROUP BY task_id, price_source, cost_source;
