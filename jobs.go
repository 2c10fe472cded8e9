package purser

import (
	"context"
	"errors"
	"time"
)

// JobState is where a job is on the queue.
type JobState string

// Job states.
const (
	// JobQueued: waiting for a worker (new, or given back by one).
	JobQueued JobState = "queued"
	// JobLeased: a worker runs it, for as long as it renews its lease.
	JobLeased JobState = "leased"
	// JobFinished: its task ended DONE, BLOCKED or FAILED; Outcome says which.
	JobFinished JobState = "finished"
)

// Job is a task submitted to the queue that workers on many hosts take
// their tasks from.
type Job struct {
	TaskID string
	RunID  string
	// TaskFile is the task file's absolute path: every worker host must see
	// it, and the task's workspace, at that same path (a shared mount).
	TaskFile string
	State    JobState
	// Worker is the owner ID of the worker holding (or last holding) it.
	Worker string
	// Attempts counts the leases granted on it: more than one means a
	// worker died, lost its lease or gave the job back.
	Attempts int
	// Outcome is the task's final state, for a finished job.
	Outcome string
	// LeaseLost is the worker whose lease ran out when ClaimJob granted the
	// job anew, "" otherwise: that worker is gone as far as the task is
	// concerned, whatever its host.
	LeaseLost string
}

// ErrLeaseLost is returned by a JobQueue for a job the worker no longer
// holds: its lease ran out and the job may be another worker's now.
var ErrLeaseLost = errors.New("lease lost")

// JobQueue is a queue of tasks shared by workers: on many hosts (the
// PostgreSQL store), or on the one machine that holds the database file
// (SQLite). Claims are atomic: one job goes to one worker at a time, and a
// job whose worker stopped renewing its lease (killed, host lost, network
// cut) goes to another once the lease has run out, by the store's clock
// (the server's; on SQLite, the machine's).
type JobQueue interface {
	// SubmitJob queues a job; a task already submitted is left as it is and
	// reported false.
	SubmitJob(ctx context.Context, j Job) (queued bool, err error)
	// ClaimJob leases the oldest job that is queued or whose lease ran out
	// to worker, for lease; ok is false when there is none.
	ClaimJob(ctx context.Context, worker string, lease time.Duration) (j Job, ok bool, err error)
	// RenewLease extends worker's lease on a job; ErrLeaseLost when it is
	// no longer worker's.
	RenewLease(ctx context.Context, taskID, worker string, lease time.Duration) error
	// FinishJob marks worker's job finished with the task's final state.
	FinishJob(ctx context.Context, taskID, worker, outcome string) error
	// ReleaseJob gives a job back to the queue (the worker was stopped, or
	// the task must wait), to be claimed again once after has passed.
	ReleaseJob(ctx context.Context, taskID, worker string, after time.Duration) error
	// Jobs lists a run's jobs ("": every run's), in the order submitted.
	Jobs(ctx context.Context, runID string) ([]Job, error)
}
