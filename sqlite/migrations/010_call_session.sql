-- The CLI's own session file of a call (Claude's transcript, Codex's
-- rollout, Gemini's chat file), recorded as soon as the backend knows it, so
-- that a resume after a crash reads what the dead call spent from it.
ALTER TABLE calls ADD COLUMN session TEXT NOT NULL DEFAULT '';
