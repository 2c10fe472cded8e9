-- Holds on a run budget shared by several processes: admission counts the
-- run's spend plus the holds not yet released or expired.
CREATE TABLE run_reservations (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     TEXT NOT NULL,
    usd_nanos  INTEGER NOT NULL,
    tokens     INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX run_reservations_run ON run_reservations (run_id, expires_at);
