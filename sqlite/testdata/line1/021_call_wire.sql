-- The wire journal of a call: the file Purser's metering proxy wrote the
-- usage of every reply the provider finished sending (backend/meter). On
-- resume, what a dead call spent is recovered from it as well as from the
-- CLI's session file.
ALTER TABLE calls ADD COLUMN wire TEXT NOT NULL DEFAULT '';
