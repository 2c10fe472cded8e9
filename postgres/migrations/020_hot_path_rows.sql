-- A run's holds summed in its usage_totals row, beside what it spent, so that
-- one guarded statement decides a hold on a shared run (PostgreSQL): the row's
-- lock orders the holds on one run, and the guard reads the row's latest
-- spend and holds, where a hold took the run's advisory lock and four
-- statements. held_* is always the sum of the run's run_reservations rows,
-- expired or not (an expired one is subtracted when it is swept). SQLite
-- decides a hold inside one IMMEDIATE transaction and needs no such row; its
-- 020 rebuilds two of the ledger's tables so that an append writes fewer pages.
ALTER TABLE usage_totals ADD COLUMN held_usd_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_totals ADD COLUMN held_tokens BIGINT NOT NULL DEFAULT 0;
INSERT INTO usage_totals (scope, id) SELECT DISTINCT 'run', run_id FROM run_reservations ON CONFLICT (scope, id) DO NOTHING;
UPDATE usage_totals t SET held_usd_nanos = s.usd, held_tokens = s.tokens
FROM (SELECT run_id, SUM(usd_nanos)::bigint AS usd, SUM(tokens)::bigint AS tokens FROM run_reservations GROUP BY run_id) s
WHERE t.scope = 'run' AND t.id = s.run_id;
