package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storerow"
)

// The job queue on SQLite serves workers on the machine that holds the
// file, as the rest of this store does. It is safe under concurrent
// processes because every change is made under SQLite's one write lock:
//
//   - ClaimJob reads the oldest claimable job and leases it in one BEGIN
//     IMMEDIATE transaction (_txlock=immediate), which takes the write lock
//     before its first read, waiting for it (busy_timeout). No other
//     process can write between the read and the update, so a job is never
//     granted twice; claimers queue on the lock for a few statements'
//     time instead of skipping each other's rows as PostgreSQL's SKIP LOCKED
//     does.
//   - RenewLease, FinishJob and ReleaseJob are each one UPDATE guarded by
//     worker and state: a single statement is atomic, and one that changes
//     no row means the job is no longer the worker's (ErrLeaseLost).
//
// Leases and not_before are judged by the local clock, which every process
// sharing the file reads; a file on a network filesystem shared by several
// hosts would have neither a trustworthy lock nor one clock, and is not
// supported (the PostgreSQL store is for workers on many hosts).

var _ purser.JobQueue = (*Store)(nil)

// SubmitJob queues a job, once per task.
func (s *Store) SubmitJob(ctx context.Context, j purser.Job) (bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO jobs (task_id, run_id, task_file, submitted_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (task_id) DO NOTHING`, j.TaskID, j.RunID, j.TaskFile, time.Now().UnixNano())
	if err != nil {
		return false, fmt.Errorf("submit task %s: %w", j.TaskID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("submit task %s: %w", j.TaskID, err)
	}
	return n == 1, nil
}

// ClaimJob leases the oldest claimable job to worker, in one IMMEDIATE
// transaction (see above): of claimers at once, each gets a different job.
func (s *Store) ClaimJob(ctx context.Context, worker string, lease time.Duration) (purser.Job, bool, error) {
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return purser.Job{}, false, fmt.Errorf("claim a job: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UnixNano()
	j, err := storerow.ScanJobClaim(tx.QueryRowContext(ctx, `SELECT task_id, run_id, task_file, attempts, state, worker FROM jobs
		WHERE (state = 'queued' AND not_before <= ?) OR (state = 'leased' AND lease_until <= ?)
		ORDER BY seq LIMIT 1`, now, now), worker)
	if errors.Is(err, sql.ErrNoRows) {
		return purser.Job{}, false, nil
	}
	if err != nil {
		return purser.Job{}, false, fmt.Errorf("claim a job: %w", err)
	}
	j.Attempts++
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'leased', worker = ?, lease_until = ?, attempts = ? WHERE task_id = ?`,
		worker, now+lease.Nanoseconds(), j.Attempts, j.TaskID); err != nil {
		return purser.Job{}, false, fmt.Errorf("claim job %s: %w", j.TaskID, err)
	}
	if err := tx.Commit(); err != nil {
		return purser.Job{}, false, fmt.Errorf("claim job %s: %w", j.TaskID, err)
	}
	return j, true, nil
}

// held runs an update of worker's leased job; none updated: the lease is lost.
func (s *Store) held(ctx context.Context, what, taskID, worker, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, append(args, taskID, worker)...)
	if err != nil {
		return fmt.Errorf("%s job %s: %w", what, taskID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s job %s: %w", what, taskID, err)
	}
	if n == 0 {
		return fmt.Errorf("%s job %s: %w", what, taskID, purser.ErrLeaseLost)
	}
	return nil
}

// RenewLease extends worker's lease. A lease that ran out but that nobody
// took since is still worker's.
func (s *Store) RenewLease(ctx context.Context, taskID, worker string, lease time.Duration) error {
	return s.held(ctx, "renew the lease on", taskID, worker,
		`UPDATE jobs SET lease_until = ? WHERE task_id = ? AND worker = ? AND state = 'leased'`, time.Now().UnixNano()+lease.Nanoseconds())
}

// FinishJob marks worker's job finished with its task's final state.
func (s *Store) FinishJob(ctx context.Context, taskID, worker, outcome string) error {
	return s.held(ctx, "finish", taskID, worker,
		`UPDATE jobs SET state = 'finished', outcome = ?, finished_at = ? WHERE task_id = ? AND worker = ? AND state = 'leased'`, outcome, time.Now().UnixNano())
}

// ReleaseJob gives worker's job back to the queue, to be claimed again
// once after has passed.
func (s *Store) ReleaseJob(ctx context.Context, taskID, worker string, after time.Duration) error {
	return s.held(ctx, "release", taskID, worker,
		`UPDATE jobs SET state = 'queued', lease_until = 0, not_before = ? WHERE task_id = ? AND worker = ? AND state = 'leased'`, time.Now().UnixNano()+after.Nanoseconds())
}

// Jobs lists a run's jobs ("": all), in the order submitted.
func (s *Store) Jobs(ctx context.Context, runID string) ([]purser.Job, error) {
	return query(ctx, s.db, "jobs", storerow.ScanJob, `SELECT `+storerow.JobColumns+` FROM jobs WHERE ? = '' OR run_id = ? ORDER BY seq`, runID, runID)
}
