-- Named budgets form a tree (org → team → repository): a budget's parent is
-- the budget it is a part of, '' for a root. A run drawing from a budget
-- draws from its every ancestor; a budget's spend is that of the runs
-- drawing from it or from any budget under it.
ALTER TABLE named_budgets ADD COLUMN parent TEXT NOT NULL DEFAULT '';
CREATE INDEX named_budgets_parent ON named_budgets (parent);
