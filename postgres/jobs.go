package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storerow"
)

var _ purser.JobQueue = (*Store)(nil)

// SubmitJob queues a job, once per task.
func (s *Store) SubmitJob(ctx context.Context, j purser.Job) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO jobs (task_id, run_id, task_file, submitted_at) VALUES ($1, $2, $3, `+serverNanos+`)
		ON CONFLICT (task_id) DO NOTHING`, j.TaskID, j.RunID, j.TaskFile)
	if err != nil {
		return false, fmt.Errorf("submit task %s: %w", j.TaskID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimJob leases the oldest claimable job to worker. The row is taken
// FOR UPDATE SKIP LOCKED: claimers at once each get a different job, none
// waits on another's, and a job is never granted twice.
func (s *Store) ClaimJob(ctx context.Context, worker string, lease time.Duration) (purser.Job, bool, error) {
	j, err := storerow.ScanJobClaim(s.pool.QueryRow(ctx, `WITH next AS (
			SELECT task_id, state, worker FROM jobs
			WHERE (state = 'queued' AND not_before <= `+serverNanos+`) OR (state = 'leased' AND lease_until <= `+serverNanos+`)
			ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
		UPDATE jobs SET state = 'leased', worker = $1, lease_until = `+serverNanos+` + $2, attempts = jobs.attempts + 1
		FROM next WHERE jobs.task_id = next.task_id
		RETURNING jobs.task_id, jobs.run_id, jobs.task_file, jobs.attempts, next.state, next.worker`,
		worker, lease.Nanoseconds()), worker)
	if errors.Is(err, pgx.ErrNoRows) {
		return purser.Job{}, false, nil
	}
	if err != nil {
		return purser.Job{}, false, fmt.Errorf("claim a job: %w", err)
	}
	return j, true, nil
}

// held runs an update of worker's leased job; none updated: the lease is lost.
func (s *Store) held(ctx context.Context, what, taskID, worker, query string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, append([]any{taskID, worker}, args...)...)
	if err != nil {
		return fmt.Errorf("%s job %s: %w", what, taskID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s job %s: %w", what, taskID, purser.ErrLeaseLost)
	}
	return nil
}

// RenewLease extends worker's lease. A lease that ran out but that nobody
// took since is still worker's.
func (s *Store) RenewLease(ctx context.Context, taskID, worker string, lease time.Duration) error {
	return s.held(ctx, "renew the lease on", taskID, worker,
		`UPDATE jobs SET lease_until = `+serverNanos+` + $3 WHERE task_id = $1 AND worker = $2 AND state = 'leased'`, lease.Nanoseconds())
}

// FinishJob marks worker's job finished with its task's final state.
func (s *Store) FinishJob(ctx context.Context, taskID, worker, outcome string) error {
	return s.held(ctx, "finish", taskID, worker,
		`UPDATE jobs SET state = 'finished', outcome = $3, finished_at = `+serverNanos+` WHERE task_id = $1 AND worker = $2 AND state = 'leased'`, outcome)
}

// ReleaseJob gives worker's job back to the queue, to be claimed again
// once after has passed.
func (s *Store) ReleaseJob(ctx context.Context, taskID, worker string, after time.Duration) error {
	return s.held(ctx, "release", taskID, worker,
		`UPDATE jobs SET state = 'queued', lease_until = 0, not_before = `+serverNanos+` + $3 WHERE task_id = $1 AND worker = $2 AND state = 'leased'`, after.Nanoseconds())
}

// Jobs lists a run's jobs ("": all), in the order submitted.
func (s *Store) Jobs(ctx context.Context, runID string) ([]purser.Job, error) {
	return collect(ctx, s, "jobs", storerow.ScanJob, `SELECT `+storerow.JobColumns+` FROM jobs WHERE $1 = '' OR run_id = $1 ORDER BY seq`, runID)
}
