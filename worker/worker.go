// Package worker is the job queue's consumer (purser worker): it claims the
// jobs purser submit queued, runs each task through the engine while it
// renews the job's lease, backs off from a job the engine refused, and
// settles each job by its task's recorded state.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/purser-dev/purser/internal/tick"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/workspace"
)

// errLeaseLost is the cause of a task stopped because its worker lost the
// job's lease: another worker may be running it now.
var errLeaseLost = errors.New("the job's lease was lost")

// leaseOwners is a worker's Owners: a process on this host is gone when
// it is (proc.Owners); a worker on any host is gone, for the task, once
// the queue granted its job anew after its lease ran out.
type leaseOwners struct {
	proc.Owners
	mu   sync.Mutex
	lost map[string]bool
}

// Gone reports whether owner is gone: its lease ran out, or its process is.
func (o *leaseOwners) Gone(owner string) bool {
	o.mu.Lock()
	lost := o.lost[owner]
	o.mu.Unlock()
	return lost || o.Owners.Gone(owner)
}

func (o *leaseOwners) leaseLost(owner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lost == nil {
		o.lost = map[string]bool{}
	}
	o.lost[owner] = true
}

// worker takes jobs from the queue and runs their tasks.
type worker struct {
	app     *app.App
	q       app.JobStore
	owners  *leaseOwners
	self    string
	lease   time.Duration
	context *contextbuild.Builder
	guard   *workspace.Guard // shared by the engines of every job
	log     *slog.Logger
	out     io.Writer
	outMu   sync.Mutex
	json    bool

	// refused are the jobs this worker gave back because the engine
	// refused their task (and why), until one of them settles otherwise:
	// draining, a queue holding only these is done with, not waited on
	// forever.
	refusedMu sync.Mutex
	refused   map[string]string
}

// RefusedError is Serve's error when, draining, only jobs the engine
// refused are left on the queue: they stay queued, to be run once what
// refused them is gone.
type RefusedError struct {
	// Jobs are the refused jobs' task IDs, with why each was refused.
	Jobs map[string]string
}

func (e *RefusedError) Error() string {
	ids := make([]string, 0, len(e.Jobs))
	for id := range e.Jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id + " (" + e.Jobs[id] + ")"
	}
	return fmt.Sprintf("worker --drain: only refused jobs are left on the queue, still queued: %s", strings.Join(parts, "; "))
}

// Options say how a worker takes and runs jobs.
type Options struct {
	// Concurrency is how many tasks it runs at once (at least 1).
	Concurrency int
	// Lease is how long a job stays the worker's without a renewal
	// (renewed every third of it).
	Lease time.Duration
	// Poll is how often an idle worker looks for a job.
	Poll time.Duration
	// Drain ends Serve once every job on the queue is finished.
	Drain bool
	// Out is told what the worker does, a line at a time; Log its warnings.
	Out io.Writer
	// JSON makes Out's lines one JSON object per job settled (SettledJSON).
	JSON bool
	Log  *slog.Logger
	// Gateway is the --gateway flag: the door's shared service the
	// worker's lanes open on (app.GatewaySocket's rule; "": the variable,
	// then purser.yaml, decide).
	Gateway string
}

// Serve takes jobs from the queue of a (opened with app.Options.Queue) and
// runs their tasks, until ctx ends (or, draining, until no job is left
// unfinished), and waits for the tasks it runs. On ctx's end the tasks
// stop, resumable, and their jobs go back to the queue.
func Serve(ctx context.Context, a *app.App, o Options) error {
	switch {
	case a.Queue == nil:
		return errors.New("worker: the database was not opened for the job queue (app.Options.Queue)")
	case o.Concurrency < 1 || o.Lease <= 0 || o.Poll <= 0:
		return fmt.Errorf("worker: want a concurrency of at least 1 and a positive lease and poll, got %d, %s, %s", o.Concurrency, o.Lease, o.Poll)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	sock, err := app.UseGateway(o.Gateway, a.Project)
	if err != nil {
		return err
	}
	if sock != "" && !o.JSON { // --json's lines are jobs settled only
		// The keys are the service's: this process holds none, and a
		// service down refuses each call rather than open a lane here.
		fmt.Fprintf(o.Out, "worker: the door's lanes open on the service at %s (purser gateway)\n", sock)
	}
	cb, err := contextbuild.New()
	if err != nil {
		return err
	}
	owners := &leaseOwners{}
	w := &worker{app: a, q: a.Queue, owners: owners, self: owners.Self(), lease: o.Lease, context: cb, guard: workspace.NewGuard(), out: o.Out, log: o.Log, json: o.JSON}
	return w.serve(ctx, o.Concurrency, o.Poll, o.Drain)
}

// SettledJSON is a job settled, as worker --json prints it: one line each.
type SettledJSON struct {
	TaskID  string `json:"task"`
	RunID   string `json:"run"`
	Attempt int    `json:"attempt"`
	// Outcome is the task's final state (DONE, BLOCKED, FAILED), or what
	// became of the job: "given back" (the worker was stopped), "refused"
	// (given back, tried again after RetryIn), "lease lost", "left to its
	// lease".
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	// RetryIn is, for a refused job, how long before it can be claimed
	// again, in seconds.
	RetryIn float64 `json:"retryInSeconds,omitempty"`
}

// settled says how a job was settled: the text line, or with Options.JSON
// one JSON object.
func (w *worker) settled(job purser.Job, outcome, why string, retryIn time.Duration, format string, args ...any) {
	if !w.json {
		w.say(format, args...)
		return
	}
	b, err := json.Marshal(SettledJSON{TaskID: job.TaskID, RunID: job.RunID, Attempt: job.Attempts, Outcome: outcome, Reason: why, RetryIn: retryIn.Seconds()})
	if err != nil {
		w.say(format, args...)
		return
	}
	w.say("%s", b)
}

func (w *worker) say(format string, args ...any) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	fmt.Fprintf(w.out, format+"\n", args...)
}

// lineWriter passes what is written to it to the worker's output whole,
// under its lock, so that lines of tasks running at once never mix.
type lineWriter struct{ w *worker }

func (l lineWriter) Write(p []byte) (int, error) {
	l.w.outMu.Lock()
	defer l.w.outMu.Unlock()
	return l.w.out.Write(p)
}

// serve claims jobs while a slot is free, until ctx ends (or, draining,
// until no job is left unfinished), and waits for the tasks it runs.
func (w *worker) serve(ctx context.Context, concurrency int, poll time.Duration, drain bool) error {
	slots := make(chan struct{}, concurrency)
	var running sync.WaitGroup
	defer running.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		job, ok, err := w.q.ClaimJob(ctx, w.self, w.lease)
		if err != nil || !ok {
			<-slots
			if err != nil && ctx.Err() == nil {
				w.log.Warn("claiming a job", "error", redact.String(err.Error()))
			}
			if err == nil && drain && len(slots) == 0 {
				if done, err := w.drained(ctx); err != nil || done {
					return err
				}
			}
			select {
			case <-time.After(poll):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		running.Add(1)
		go func() {
			defer running.Done()
			defer func() { <-slots }()
			w.run(ctx, job)
		}()
	}
}

// drained says whether a draining worker is done: every job on the queue
// is finished (nil), or those that are not are queued jobs this worker gave
// back refused (a *RefusedError naming them). A job leased by another
// worker, or not yet tried here, is waited for. An error reading the queue
// is not one: it is tried again.
func (w *worker) drained(ctx context.Context) (bool, error) {
	jobs, err := w.q.Jobs(ctx, "")
	if err != nil {
		return false, nil
	}
	w.refusedMu.Lock()
	defer w.refusedMu.Unlock()
	left := map[string]string{}
	for _, j := range jobs {
		if j.State == purser.JobFinished {
			continue
		}
		why, refused := w.refused[j.TaskID]
		if !refused || j.State != purser.JobQueued {
			return false, nil
		}
		left[j.TaskID] = why
	}
	if len(left) == 0 {
		return true, nil
	}
	return true, &RefusedError{Jobs: left}
}

// noteRefused records (why != "") or forgets (why == "") the refusal of a
// job's task.
func (w *worker) noteRefused(taskID, why string) {
	w.refusedMu.Lock()
	defer w.refusedMu.Unlock()
	if why == "" {
		delete(w.refused, taskID)
		return
	}
	if w.refused == nil {
		w.refused = map[string]string{}
	}
	w.refused[taskID] = why
}

// run runs one job's task while renewing its lease, and settles the job:
// finished with the task's state, given back when the worker was stopped,
// left alone when its lease was lost.
func (w *worker) run(ctx context.Context, job purser.Job) {
	if job.LeaseLost != "" {
		w.owners.leaseLost(job.LeaseLost)
	}
	if !w.json {
		w.say("claimed %s (run %s, attempt %d)", job.TaskID, job.RunID, job.Attempts)
	}
	taskCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	stopRenewing := w.renew(taskCtx, job, stop)
	state, why, refused := w.runTask(taskCtx, job)
	stopRenewing()
	if errors.Is(context.Cause(taskCtx), errLeaseLost) {
		w.settled(job, "lease lost", why, 0, "%s: lease lost; stopped here (%s)", job.TaskID, why)
		return
	}
	settle := context.WithoutCancel(ctx)
	if refused && ctx.Err() == nil {
		// The engine would not take it (another process runs it): nothing
		// here was recorded, so its RUNNING state is that process's, and the
		// job is not left to its lease but given back with a back-off.
		w.giveBackRefused(settle, job, why)
		return
	}
	// The job is settled by the task's state as recorded: a stop the store
	// could not record (it was unreachable) leaves the job to run out its
	// lease and go to another worker, which resumes the task.
	rec, err := w.q.Task(settle, job.TaskID)
	switch {
	case err != nil && !errors.Is(err, purser.ErrNotFound):
		w.settled(job, "left to its lease", why, 0, "%s: %s, but its state could not be read back; the job is left to its lease (%s)", job.TaskID, state, why)
		return
	case err == nil && rec.State == purser.StateRunning && state != purser.StateRunning:
		w.settled(job, "left to its lease", why, 0, "%s: %s here, still RUNNING as recorded; the job is left to its lease (%s)", job.TaskID, state, why)
		return
	case err == nil && state == purser.StateFailed && rec.State != purser.StateFailed:
		// It failed before it started (a task file that no longer loads).
		if err := w.q.SetTaskState(settle, job.TaskID, purser.StateFailed, why); err != nil {
			w.settled(job, "left to its lease", why, 0, "%s: FAILED, unrecorded; the job is left to its lease (%s)", job.TaskID, why)
			return
		}
	}
	refusal := ""
	defer func() { w.noteRefused(job.TaskID, refusal) }()
	switch {
	case ctx.Err() != nil:
		err = w.q.ReleaseJob(settle, job.TaskID, w.self, 0)
		w.settled(job, "given back", why, 0, "%s: given back to the queue (%s)", job.TaskID, why)
	case state == purser.StatePending || state == purser.StateRunning:
		w.giveBackRefused(settle, job, why)
		refusal = why
		return
	default:
		err = w.q.FinishJob(settle, job.TaskID, w.self, string(state))
		w.settled(job, string(state), why, 0, "%s: %s (%s)", job.TaskID, state, why)
	}
	if err != nil {
		w.log.Warn("settling a job", "task", job.TaskID, "error", redact.String(err.Error()))
	}
}

// giveBackRefused gives back a job whose task the engine refused, to come
// round later and later rather than at once, again and again; a draining
// worker counts it (drained).
func (w *worker) giveBackRefused(ctx context.Context, job purser.Job, why string) {
	after := refusalBackoff(job.Attempts)
	if err := w.q.ReleaseJob(ctx, job.TaskID, w.self, after); err != nil {
		w.log.Warn("settling a job", "task", job.TaskID, "error", redact.String(err.Error()))
	}
	w.noteRefused(job.TaskID, why)
	w.settled(job, "refused", why, after, "%s: refused, given back to the queue, to be tried again in %s (%s)", job.TaskID, after, why)
}

// refusalBackoff is how long a job the engine refused waits before it can be
// claimed again: 1 s after its first lease, doubling with each, at most 5
// minutes (a task another process runs may take hours; one that can never
// run is said each time it comes round).
func refusalBackoff(attempts int) time.Duration {
	return min(time.Second<<min(max(attempts-1, 0), 9), 5*time.Minute)
}

// renew renews the job's lease every third of it; a lease lost, or not
// renewed for a whole lease, stops the task.
func (w *worker) renew(ctx context.Context, job purser.Job, stop context.CancelCauseFunc) func() {
	last := time.Now()
	var once sync.Once
	return tick.Every(w.lease/3, func() {
		err := w.q.RenewLease(context.WithoutCancel(ctx), job.TaskID, w.self, w.lease)
		switch {
		case err == nil:
			last = time.Now()
		case errors.Is(err, purser.ErrLeaseLost) || time.Since(last) >= w.lease:
			once.Do(func() { stop(fmt.Errorf("%w: %v", errLeaseLost, err)) })
		default:
			w.log.Warn("renewing a lease", "task", job.TaskID, "error", redact.String(err.Error()))
		}
	})
}

// runTask runs the job's task in its run and returns the state it ended in
// and why; refused says the engine would not take it (nothing was recorded).
func (w *worker) runTask(ctx context.Context, job purser.Job) (state purser.TaskState, why string, refused bool) {
	state, why = w.runTaskOnce(ctx, job, &refused)
	return state, why, refused
}

// runTaskOnce is runTask, refused set through a pointer so that its many
// returns stay short.
func (w *worker) runTaskOnce(ctx context.Context, job purser.Job, refused *bool) (purser.TaskState, string) {
	task, proj, err := w.app.LoadTask(job.TaskFile)
	if err != nil {
		return purser.StateFailed, redact.String(err.Error())
	}
	if task.ID != job.TaskID {
		return purser.StateFailed, fmt.Sprintf("%s now has id %q, not %q", job.TaskFile, task.ID, job.TaskID)
	}
	// The task file may have moved its workspace over the database (a
	// SQLite file) since it was submitted: an agent there could rewrite the
	// ledger. A drawFrom: added to the file since it was submitted, naming a
	// budget the database does not know, fails the task here rather than
	// have the engine refuse it, and the job go round the queue, again and
	// again.
	if err := w.app.Preflight(ctx, app.Preflight{Tasks: []purser.Task{task}, Files: []string{job.TaskFile}, Draws: true, Project: proj}); err != nil {
		return purser.StateFailed, redact.String(err.Error())
	}
	// The task's alerts: purser.yaml's webhooks, as purser run sends them;
	// first those an earlier process left undelivered.
	al, err := app.StartAlerts(ctx, lineWriter{w}, proj, w.q, []purser.Task{task})
	if err != nil {
		return purser.StateFailed, redact.String(err.Error())
	}
	defer al.Close(lineWriter{w})
	var observe func(purser.Event)
	if al != nil {
		observe = al.Observe
	}
	e, err := w.app.NewEngine(app.EngineOptions{Context: w.context, Guard: w.guard, Observe: observe, Prices: proj.Prices, Owners: w.owners, Logger: w.log.With("task", task.ID)})
	if err != nil {
		return purser.StateFailed, err.Error()
	}
	outcomes, err := e.RunBatch(ctx, engine.Batch{Tasks: []purser.Task{task}, Name: job.RunID, Parallel: 1})
	if err != nil {
		// Refused before it ran: its task RUNNING in a live process here.
		*refused = true
		return purser.StatePending, redact.String(err.Error())
	}
	o := outcomes[0]
	var se *engine.StopError
	switch {
	case o.Skipped:
		return purser.StateDone, "already DONE"
	case o.Err == nil:
		return purser.StateDone, "all validators passed"
	case errors.As(o.Err, &se):
		// RUNNING: claimed by another process between the batch's check
		// and the task's start.
		*refused = se.State == purser.StateRunning
		return se.State, redact.String(engine.Describe(o.Err))
	}
	return purser.StateFailed, redact.String(o.Err.Error())
}
