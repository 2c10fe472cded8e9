-- The queue of tasks that workers on many hosts take their tasks from.
-- lease_until is in the server's clock (Unix nanoseconds), so hosts with
-- skewed clocks agree on when a lease has run out.
CREATE TABLE jobs (
    seq          BIGSERIAL NOT NULL,
    task_id      TEXT PRIMARY KEY,
    run_id       TEXT NOT NULL,
    task_file    TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'queued',
    worker       TEXT NOT NULL DEFAULT '',
    lease_until  BIGINT NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0,
    not_before   BIGINT NOT NULL DEFAULT 0, -- a job given back to wait is not claimed before this
    outcome      TEXT NOT NULL DEFAULT '',
    submitted_at BIGINT NOT NULL,
    finished_at  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX jobs_claimable ON jobs (seq) WHERE state <> 'finished';
CREATE INDEX jobs_run ON jobs (run_id, seq);
