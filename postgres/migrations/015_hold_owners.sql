-- Who placed each hold: the process's owner ID ("host pid start") and the
-- task whose call it admits. A resume (or a worker taking a job whose lease
-- ran out) that finds the task's previous owner gone drops that owner's
-- holds instead of waiting out their TTL. Holds placed before this
-- migration have no owner and only lapse.
ALTER TABLE run_reservations ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE run_reservations ADD COLUMN task_id TEXT NOT NULL DEFAULT '';
CREATE INDEX run_reservations_owner ON run_reservations (owner, task_id);
ALTER TABLE named_reservations ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE named_reservations ADD COLUMN task_id TEXT NOT NULL DEFAULT '';
CREATE INDEX named_reservations_owner ON named_reservations (owner, task_id);
