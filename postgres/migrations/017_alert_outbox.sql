-- The alert outbox: every alert is recorded, per webhook, before its first
-- delivery attempt, so that one a killed process had not delivered is
-- delivered by the next start. webhook is the webhook's configured name,
-- never its URL (a Slack webhook's URL is a secret). owner and lease_until
-- are the process delivering it; body is the request body, redacted.
CREATE TABLE alert_outbox (
    seq         BIGSERIAL PRIMARY KEY,
    id          TEXT NOT NULL,
    webhook     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    body        BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    state       TEXT NOT NULL DEFAULT 'pending',
    owner       TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    UNIQUE (id, webhook)
);
CREATE INDEX alert_outbox_pending ON alert_outbox (state, webhook);
