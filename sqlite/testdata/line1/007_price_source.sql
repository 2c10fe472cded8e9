-- Which price table and rates priced an estimated event (or why none did),
-- and how many earlier unknown-cost events of its call a reported event settles.
ALTER TABLE usage ADD COLUMN price_source TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN settles_unknown INTEGER NOT NULL DEFAULT 0;
