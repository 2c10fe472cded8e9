CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    budget_json TEXT,
    created_at  INTEGER NOT NULL
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
    elapsed_ns  INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE iterations (
    task_id         TEXT NOT NULL,
    n               INTEGER NOT NULL,
    started_at      INTEGER NOT NULL,
    ended_at        INTEGER,
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
    started_at        INTEGER NOT NULL,
    ended_at          INTEGER,
    outcome           TEXT NOT NULL DEFAULT '',
    error             TEXT NOT NULL DEFAULT '',
    context_tokens    INTEGER NOT NULL DEFAULT 0,
    reserved_usd      INTEGER NOT NULL DEFAULT 0,
    reserved_tokens   INTEGER NOT NULL DEFAULT 0,
    max_output_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX calls_task ON calls (task_id, started_at);

-- The usage ledger is append-only; idem_key makes appends idempotent.
CREATE TABLE usage (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    idem_key      TEXT NOT NULL UNIQUE,
    task_id       TEXT NOT NULL,
    run_id        TEXT NOT NULL DEFAULT '',
    call_id       TEXT NOT NULL DEFAULT '',
    iteration     INTEGER NOT NULL DEFAULT 0,
    kind          TEXT NOT NULL DEFAULT '',
    model         TEXT NOT NULL DEFAULT '',
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read    INTEGER NOT NULL DEFAULT 0,
    cache_write   INTEGER NOT NULL DEFAULT 0,
    reasoning     INTEGER NOT NULL DEFAULT 0,
    usd_nanos     INTEGER NOT NULL DEFAULT 0,
    cost_source   TEXT NOT NULL DEFAULT 'none',
    elapsed_ns    INTEGER NOT NULL DEFAULT 0,
    iteration_end INTEGER NOT NULL DEFAULT 0,
    at            INTEGER NOT NULL
);
CREATE INDEX usage_task ON usage (task_id, seq);

CREATE TABLE degrade_events (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id   TEXT NOT NULL,
    iteration INTEGER NOT NULL,
    call_kind TEXT NOT NULL DEFAULT '',
    action    TEXT NOT NULL,
    tier      TEXT NOT NULL,
    metric    TEXT NOT NULL,
    scope     TEXT NOT NULL,
    detail    TEXT NOT NULL DEFAULT '',
    at        INTEGER NOT NULL
);

CREATE TABLE artifacts (
    task_id    TEXT NOT NULL,
    name       TEXT NOT NULL,
    content    BLOB NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (task_id, name)
);
