-- The process running a call, recorded while it runs, so that a resume can
-- make sure nothing of a dead owner's call still runs.
ALTER TABLE calls ADD COLUMN process TEXT NOT NULL DEFAULT '';
