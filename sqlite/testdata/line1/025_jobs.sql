-- The queue of tasks that workers on this machine take their tasks from
-- (purser submit, purser worker), as postgres migration 007 is for workers
-- on many hosts. Times are Unix nanoseconds by the local clock, which every
-- process sharing the file reads: they are on one machine.
CREATE TABLE jobs (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT, -- the order submitted; never reused
    task_id      TEXT NOT NULL UNIQUE,
    run_id       TEXT NOT NULL,
    task_file    TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'queued',
    worker       TEXT NOT NULL DEFAULT '',
    lease_until  INTEGER NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0,
    not_before   INTEGER NOT NULL DEFAULT 0, -- a job given back to wait is not claimed before this
    outcome      TEXT NOT NULL DEFAULT '',
    submitted_at INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_claimable ON jobs (seq) WHERE state <> 'finished';
CREATE INDEX jobs_run ON jobs (run_id, seq);
