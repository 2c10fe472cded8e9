-- List-price dollars (usage on a flat-rate plan, cost_source 'list'), kept
-- apart from money spent in the running totals; no earlier event is 'list'.
ALTER TABLE usage_totals ADD COLUMN list_usd_nanos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_totals ADD COLUMN list_events BIGINT NOT NULL DEFAULT 0;
