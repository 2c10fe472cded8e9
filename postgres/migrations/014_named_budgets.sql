-- Named, long-lived budgets that runs draw from (a team's month, a
-- repository's day). Their spend is not recorded apart: it is the ledger of
-- the runs drawing from them, inside the window.
CREATE TABLE named_budgets (
    name        TEXT   PRIMARY KEY,
    budget_json TEXT   NOT NULL,
    win         TEXT   NOT NULL,
    zone        TEXT   NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL
);
CREATE TABLE named_budget_raises (
    id        BIGSERIAL PRIMARY KEY,
    name      TEXT   NOT NULL,
    at        BIGINT NOT NULL,
    by_whom   TEXT   NOT NULL,
    source    TEXT   NOT NULL,
    from_json TEXT   NOT NULL,
    to_json   TEXT   NOT NULL
);
CREATE INDEX named_budget_raises_name ON named_budget_raises (name, id);
CREATE TABLE run_draws (
    run_id TEXT NOT NULL,
    name   TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX run_draws_name ON run_draws (name, run_id);
CREATE TABLE named_reservations (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT   NOT NULL,
    usd_nanos  BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX named_reservations_name ON named_reservations (name, expires_at);
-- A window's spend is read by run and time.
CREATE INDEX usage_run_at ON usage (run_id, at);
