-- Purser's store in PostgreSQL: the same tables as the SQLite store's. Times
-- are Unix nanoseconds (BIGINT), so they round-trip exactly as in SQLite;
-- money is BIGINT nano-dollars, never a float.

CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    budget_json TEXT NOT NULL DEFAULT '',
    elapsed_ns  BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL
);

CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL DEFAULT '',
    goal        TEXT NOT NULL DEFAULT '',
    workspace   TEXT NOT NULL DEFAULT '',
    file        TEXT NOT NULL DEFAULT '',
    budget_json TEXT NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    elapsed_ns  BIGINT NOT NULL DEFAULT 0,
    -- which process runs it ("host pid start"), so a RUNNING task whose
    -- process died can be told apart from a live one
    owner       TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX tasks_created ON tasks (created_at, id);

CREATE TABLE iterations (
    task_id         TEXT NOT NULL,
    n               INTEGER NOT NULL,
    started_at      BIGINT NOT NULL,
    ended_at        BIGINT NOT NULL DEFAULT 0,
    outcome         TEXT NOT NULL DEFAULT '',
    validators_json TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (task_id, n)
);

CREATE TABLE calls (
    id                TEXT PRIMARY KEY,
    task_id           TEXT NOT NULL,
    iteration         INTEGER NOT NULL,
    kind              TEXT NOT NULL,
    attempt           INTEGER NOT NULL,
    model             TEXT NOT NULL DEFAULT '',
    started_at        BIGINT NOT NULL,
    ended_at          BIGINT NOT NULL DEFAULT 0, -- 0: never ended (interrupted)
    outcome           TEXT NOT NULL DEFAULT '',
    error             TEXT NOT NULL DEFAULT '',
    context_tokens    BIGINT NOT NULL DEFAULT 0,
    reserved_usd      BIGINT NOT NULL DEFAULT 0,
    reserved_tokens   BIGINT NOT NULL DEFAULT 0,
    max_output_tokens BIGINT NOT NULL DEFAULT 0,
    note              TEXT NOT NULL DEFAULT ''
);
CREATE INDEX calls_task ON calls (task_id, started_at, id);

-- The usage ledger is append-only; idem_key makes appends idempotent.
CREATE TABLE usage (
    seq           BIGSERIAL PRIMARY KEY,
    idem_key      TEXT NOT NULL UNIQUE,
    task_id       TEXT NOT NULL,
    run_id        TEXT NOT NULL DEFAULT '',
    call_id       TEXT NOT NULL DEFAULT '',
    iteration     INTEGER NOT NULL DEFAULT 0,
    kind          TEXT NOT NULL DEFAULT '',
    model         TEXT NOT NULL DEFAULT '',
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read    BIGINT NOT NULL DEFAULT 0,
    cache_write   BIGINT NOT NULL DEFAULT 0,
    reasoning     BIGINT NOT NULL DEFAULT 0,
    usd_nanos     BIGINT NOT NULL DEFAULT 0,
    cost_source   TEXT NOT NULL DEFAULT 'none',
    elapsed_ns    BIGINT NOT NULL DEFAULT 0,
    iteration_end BOOLEAN NOT NULL DEFAULT FALSE,
    at            BIGINT NOT NULL
);
CREATE INDEX usage_task ON usage (task_id, seq);

-- Running totals of the ledger, per task and per run, kept in the same
-- transaction as each append.
CREATE TABLE usage_totals (
    scope      TEXT NOT NULL, -- 'task' or 'run'
    id         TEXT NOT NULL,
    usd_nanos  BIGINT NOT NULL DEFAULT 0,
    tokens     BIGINT NOT NULL DEFAULT 0,
    iterations BIGINT NOT NULL DEFAULT 0,
    reported   BIGINT NOT NULL DEFAULT 0,
    estimated  BIGINT NOT NULL DEFAULT 0,
    unknown    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, id)
);

CREATE TABLE degrade_events (
    seq       BIGSERIAL PRIMARY KEY,
    task_id   TEXT NOT NULL,
    iteration INTEGER NOT NULL,
    call_kind TEXT NOT NULL DEFAULT '',
    action    TEXT NOT NULL,
    tier      TEXT NOT NULL,
    metric    TEXT NOT NULL,
    scope     TEXT NOT NULL,
    detail    TEXT NOT NULL DEFAULT '',
    at        BIGINT NOT NULL
);
CREATE INDEX degrade_events_task ON degrade_events (task_id, seq);

CREATE TABLE artifacts (
    task_id    TEXT NOT NULL,
    name       TEXT NOT NULL,
    content    BYTEA NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (task_id, name)
);

-- Holds on a run budget shared by several processes. expires_at is in the
-- server's clock, so hosts whose clocks differ agree on what has expired.
CREATE TABLE run_reservations (
    id         BIGSERIAL PRIMARY KEY,
    run_id     TEXT NOT NULL,
    usd_nanos  BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX run_reservations_run ON run_reservations (run_id, expires_at);

-- A task's budget changed by the user on resume: who, when, from which file.
CREATE TABLE budget_changes (
    id        BIGSERIAL PRIMARY KEY,
    task_id   TEXT   NOT NULL,
    at        BIGINT NOT NULL,
    by_whom   TEXT   NOT NULL,
    source    TEXT   NOT NULL,
    from_json TEXT   NOT NULL,
    to_json   TEXT   NOT NULL
);
CREATE INDEX budget_changes_task ON budget_changes (task_id, id);
