-- The run's wall time, saved as it runs, so a resume continues its clock.
ALTER TABLE runs ADD COLUMN elapsed_ns INTEGER NOT NULL DEFAULT 0;

-- A task's budget changed by the user on resume: who, when, from which file.
CREATE TABLE budget_changes (
    id        INTEGER PRIMARY KEY,
    task_id   TEXT    NOT NULL,
    at        INTEGER NOT NULL,
    by_whom   TEXT    NOT NULL,
    source    TEXT    NOT NULL,
    from_json TEXT    NOT NULL,
    to_json   TEXT    NOT NULL
);
CREATE INDEX budget_changes_task ON budget_changes (task_id, id);
