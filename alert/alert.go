// Package alert tells people when a budget needs them: a webhook (JSON, or a
// Slack-compatible payload) on entering WARNING, on passing the warning
// line, on reaching HARD and on a task BLOCKED. It consumes the engine's
// event stream (Notifier.Observe is an engine observer) and delivers from a
// queue of its own, with retries and back-off, so a slow or dead receiver
// never holds up the engine; every alert carries an idempotency key, the
// same on every attempt, so a receiver can take each alert exactly once.
package alert

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// Kind is what an alert reports (the domain's purser.AlertKind).
type Kind = purser.AlertKind

// The kinds of alert, in rising severity.
const (
	// Warning: a budget entered WARNING (passed its optimal line).
	Warning = purser.AlertWarning
	// WarningLine: a budget in WARNING passed its warning line, from which
	// staged degrade actions apply.
	WarningLine = purser.AlertWarningLine
	// Hard: a budget reached its hard cap; the call in flight was cancelled.
	Hard = purser.AlertHard
	// Blocked: a task stopped BLOCKED by its budget.
	Blocked = purser.AlertBlocked
)

// Kinds lists every kind, in rising severity.
var Kinds = purser.AlertKinds

// Format is the shape of a webhook's payload (the domain's
// purser.AlertFormat).
type Format = purser.AlertFormat

// The payload formats.
const (
	// FormatJSON is Purser's own payload (see Payload).
	FormatJSON = purser.AlertFormatJSON
	// FormatSlack is {"text": …}, what Slack's, Mattermost's and most chat
	// tools' incoming webhooks take.
	FormatSlack = purser.AlertFormatSlack
)

// Webhook is one receiver of alerts (the domain's purser.AlertWebhook).
type Webhook = purser.AlertWebhook

// wants reports whether the webhook w takes alerts of kind k.
func wants(w Webhook, k Kind) bool {
	if len(w.Events) == 0 {
		return true
	}
	for _, e := range w.Events {
		if e == k {
			return true
		}
	}
	return false
}

// Config configures a Notifier (the domain's purser.AlertConfig, which
// config reads purser.yaml's alerts: section into). Zero durations and
// counts take the defaults.
type Config = purser.AlertConfig

// The defaults of Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxAttempts = 5
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = 30 * time.Second
	DefaultFlush       = 5 * time.Second
	DefaultMaxAge      = 24 * time.Hour
)

// KeepSettled is how long an alert that is no longer pending (delivered,
// refused or expired) stays in the outbox after it was recorded, so that
// why it was or was not delivered can still be read there; Recover then
// deletes it. It is a week, well past the default MaxAge, so that an
// alert expired at a start is still there to be read after it.
const KeepSettled = 7 * 24 * time.Hour

// withDefaults is c with every zero duration and count given its default.
func withDefaults(c Config) Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = c.Backoff
	}
	if c.Flush <= 0 {
		c.Flush = DefaultFlush
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxTotalAttempts <= 0 {
		c.MaxTotalAttempts = 4 * c.MaxAttempts
	}
	return c
}

// Alert is one thing to tell: what happened to which budget.
type Alert struct {
	// ID is the idempotency key: unique per alert, the same on every
	// delivery attempt (sent as the Idempotency-Key header and "id").
	ID     string
	Kind   Kind
	Scope  budget.Scope
	TaskID string // the task; for a run-scope alert, the task whose event showed it
	Time   time.Time
	// Metric is the metric that put the budget in its tier.
	Metric budget.Metric
	Status budget.Status  // the budget the alert is about
	Run    *budget.Status // the run's budget, when the task has one
	// Message is the engine's account, secrets removed (for Blocked, why
	// the task stopped).
	Message string
}

// Text is the alert in one line for people (the Slack payload's text).
func (a Alert) Text() string {
	var b strings.Builder
	who := "task " + a.TaskID
	if a.Scope == budget.ScopeRun {
		who = "the run of task " + a.TaskID
	}
	switch a.Kind {
	case Warning:
		fmt.Fprintf(&b, "Purser: %s entered WARNING (%s)", who, a.Metric)
	case WarningLine:
		fmt.Fprintf(&b, "Purser: %s passed its warning line (%s); staged degrade actions apply", who, a.Metric)
	case Hard:
		fmt.Fprintf(&b, "Purser: %s reached its HARD cap (%s); the call in flight was cancelled", who, a.Metric)
	case Blocked:
		fmt.Fprintf(&b, "Purser: task %s is BLOCKED by its budget", a.TaskID)
	}
	fmt.Fprintf(&b, ": %s", usedSummary(a.Status))
	// The engine's WARNING event carries the spend forecast, when the task
	// has one (docs/forecast.md): where the money is heading.
	if i := strings.Index(a.Message, "forecast to finish "); a.Kind == Warning && i >= 0 {
		fmt.Fprintf(&b, "; %s", a.Message[i:])
	}
	if a.Kind == Blocked && a.Message != "" {
		fmt.Fprintf(&b, ". %s", a.Message)
	}
	if a.Kind == Blocked {
		fmt.Fprintf(&b, ". Next: read STATUS.md in its workspace, or `purser explain %s`", a.TaskID)
	}
	if ask := a.Ask(); ask != "" {
		fmt.Fprintf(&b, ". Ask: %s", ask)
	}
	return b.String()
}

// usedSummary is what a budget has used, in words.
func usedSummary(s budget.Status) string {
	usd := s.UsedUSD.String()
	switch s.USDSource {
	case budget.SourcePartial:
		usd = "at least " + usd
	case budget.SourceUnknown:
		usd = "unknown dollars"
	}
	return fmt.Sprintf("used %s, %d tokens, %d iterations, %s", usd, s.UsedTokens, s.UsedIterations, s.UsedTime.Round(time.Second))
}

// level is how far a budget has gone, as far as alerts are concerned.
type level struct {
	tier budget.Tier
	past bool // past the warning line
}

// Notifier turns the engine's events into alerts and delivers them. Observe
// never blocks on delivery. It is safe for concurrent use.
type Notifier struct {
	cfg       Config
	sinks     []*sink
	now       func() time.Time
	nonce     string
	logf      func(string, ...any)
	outbox    purser.AlertOutbox
	owner     string
	ownerGone func(string) bool

	mu       sync.Mutex
	seq      int
	tasks    map[string]level
	run      *level
	blocked  map[string]bool
	baseline map[string]level
	closed   bool
}

// Options are a Notifier's collaborators; all optional.
type Options struct {
	// Logf reports what could not be delivered (default: discarded).
	Logf func(format string, args ...any)
	// Now is the clock alerts are stamped with (default time.Now).
	Now func() time.Time
	// Client sends the requests (default: a client with no overall
	// timeout; Config.Timeout bounds each attempt).
	Client Doer
	// Outbox, when set, records every alert, per webhook, before its first
	// attempt, and what became of it: an alert a killed process had not
	// delivered is delivered by Recover at the next start.
	Outbox purser.AlertOutbox
	// Owner is this process's owner ID ("host pid start"), under which it
	// holds the alerts it delivers; OwnerGone says whether another's
	// process is gone (default: none is).
	Owner     string
	OwnerGone func(owner string) bool
}

// New starts a Notifier: one delivery queue per webhook, so a dead receiver
// delays no other. Close it to flush.
func New(cfg Config, opts Options) *Notifier {
	cfg = withDefaults(cfg)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Client == nil {
		opts.Client = defaultClient()
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	if opts.OwnerGone == nil {
		opts.OwnerGone = func(string) bool { return false }
	}
	n := &Notifier{cfg: cfg, now: opts.Now, nonce: hex.EncodeToString(nonce[:]), logf: opts.Logf,
		outbox: opts.Outbox, owner: opts.Owner, ownerGone: opts.OwnerGone,
		tasks: map[string]level{}, blocked: map[string]bool{}, baseline: map[string]level{}}
	for _, w := range cfg.Webhooks {
		n.sinks = append(n.sinks, startSink(w, cfg, opts.Client, opts.Logf, opts.Outbox))
	}
	return n
}

// Baseline tells the Notifier where a task stood before this process ran
// it (a resumed task), so that a line it had already passed, or its being
// BLOCKED, is not announced again; a raised budget (its tier lower than
// before) re-arms them.
func (n *Notifier) Baseline(taskID string, st budget.Status, state purser.TaskState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.baseline[taskID] = level{tier: st.Tier, past: st.PastWarningLine}
	if state == purser.StateBlocked {
		n.blocked[taskID] = true
	}
}

// Observe is an engine observer: it finds the alerts an event means and
// queues them. It never waits for a delivery.
func (n *Notifier) Observe(ev purser.Event) {
	if ev.TaskID == "" || ev.Type == purser.EventNotStarted {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	prev, seen := n.tasks[ev.TaskID]
	if !seen {
		prev = n.baseline[ev.TaskID]
	}
	n.tasks[ev.TaskID] = n.crossed(prev, ev.Status, budget.ScopeTask, ev)
	if ev.Status.Tier < prev.tier {
		delete(n.blocked, ev.TaskID) // its budget was raised: it may be BLOCKED anew
	}
	if ev.Run != nil {
		var prevRun level
		if n.run != nil {
			prevRun = *n.run
		}
		cur := n.crossed(prevRun, *ev.Run, budget.ScopeRun, ev)
		n.run = &cur
	}
	if ev.Type == purser.EventStop && ev.State == purser.StateBlocked && !n.blocked[ev.TaskID] {
		n.blocked[ev.TaskID] = true
		n.queue(Alert{Kind: Blocked, Scope: budget.ScopeTask, TaskID: ev.TaskID, Metric: ev.Status.Cause,
			Status: ev.Status, Run: ev.Run, Message: redact.Display(ev.Message)})
	}
}

// crossed queues the alert for the line a budget crossed since prev, if
// any, and returns its new level. One observation gives at most one alert:
// the highest line crossed (a budget that jumps from OPTIMAL to HARD gets
// the HARD alert alone; one that enters WARNING already past the warning
// line, as one without a separate warning line always does, the WARNING
// alert). A budget raised back below a line is announced again when it
// next crosses it. Called with n.mu held.
func (n *Notifier) crossed(prev level, st budget.Status, scope budget.Scope, ev purser.Event) level {
	cur := level{tier: st.Tier, past: st.PastWarningLine}
	var kind Kind
	switch {
	case cur.tier == budget.Hard && prev.tier < budget.Hard:
		kind = Hard
	case cur.tier >= budget.Warning && prev.tier < budget.Warning:
		kind = Warning
	case cur.past && !prev.past:
		kind = WarningLine
	default:
		return cur
	}
	a := Alert{Kind: kind, Scope: scope, TaskID: ev.TaskID, Metric: st.Cause, Status: st, Message: redact.Display(ev.Message)}
	if scope == budget.ScopeTask {
		a.Run = ev.Run
	}
	n.queue(a)
	return cur
}

// queue stamps an alert, records it in the outbox for every webhook that
// wants it, and only then hands it to their queues: an alert is in the
// database before any attempt to deliver it. Called with n.mu held.
func (n *Notifier) queue(a Alert) {
	n.seq++
	a.ID = fmt.Sprintf("purser-%s-%d", n.nonce, n.seq)
	a.Time = n.now().UTC()
	var rows []purser.OutboxAlert
	var to []*sink
	var ds []delivery
	for _, s := range n.sinks {
		if !wants(s.hook, a.Kind) {
			continue
		}
		body, err := Body(s.hook.Format, a)
		if err != nil {
			n.logf("alert %s (%s, task %s) to webhook %s not delivered: encode: %v", a.ID, a.Kind, a.TaskID, s.hook.Name, err)
			continue
		}
		d := delivery{id: a.ID, kind: string(a.Kind), taskID: a.TaskID, body: body}
		rows = append(rows, purser.OutboxAlert{ID: a.ID, Webhook: s.hook.Name, Kind: d.kind, TaskID: a.TaskID, Body: body, CreatedAt: a.Time})
		to, ds = append(to, s), append(ds, d)
	}
	if n.outbox != nil && len(rows) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), outboxTimeout)
		err := n.outbox.AddAlerts(ctx, n.owner, n.lease(), rows...)
		cancel()
		if err != nil {
			// Delivered from memory all the same; only a kill would lose it.
			n.logf("alert outbox: %v", err)
		}
	}
	for i, s := range to {
		s.push(ds[i])
	}
}

// lease is how long this process holds an alert it queued or claimed
// before another host may take it: the most its attempts and the flush can
// take, and never less than ten minutes, for the wait in the queue. On
// this host a killed holder is seen gone at once (OwnerGone).
func (n *Notifier) lease() time.Duration {
	c := n.cfg
	return max(10*time.Minute, time.Duration(c.MaxAttempts)*(c.Timeout+c.MaxBackoff)+c.Flush)
}

// Recovered is what Recover found in the outbox.
type Recovered struct {
	// Queued is how many alerts an earlier process did not deliver were
	// queued again, to be delivered before any new one.
	Queued int
	// Expired is how many were given up on instead: older than
	// Config.MaxAge, or attempted Config.MaxTotalAttempts times.
	Expired int
	// MaxAge and MaxTotalAttempts are the bounds Expired was judged by.
	MaxAge           time.Duration
	MaxTotalAttempts int
	// Deleted is how many settled alerts (delivered, refused or expired)
	// recorded more than KeepSettled ago were deleted from the outbox.
	Deleted int
}

// Recover queues again, ahead of any new alert, the alerts the outbox
// holds undelivered for a webhook still configured (by its name) that no
// live process holds: those of a process that was killed, or that ran out
// of attempts or flush. Each keeps its idempotency key and its body, so a
// receiver that did take it before can drop the duplicate. Alerts too old
// or tried too often are marked expired instead, and the settled ones
// recorded more than KeepSettled ago are deleted (else the outbox grows
// with every alert ever sent). Call it once, after New and before the
// first event; without an outbox it does nothing.
func (n *Notifier) Recover(ctx context.Context) (Recovered, error) {
	r := Recovered{MaxAge: n.cfg.MaxAge, MaxTotalAttempts: n.cfg.MaxTotalAttempts}
	if n.outbox == nil || len(n.sinks) == 0 {
		return r, nil
	}
	expired, err := n.outbox.ExpireAlerts(ctx, n.now().Add(-n.cfg.MaxAge), n.cfg.MaxTotalAttempts)
	if err != nil {
		return r, fmt.Errorf("alert outbox: %w", err)
	}
	r.Expired = expired
	if r.Deleted, err = n.outbox.DeleteSettledAlerts(ctx, n.now().Add(-KeepSettled)); err != nil {
		return r, fmt.Errorf("alert outbox: %w", err)
	}
	byName := map[string]*sink{}
	names := make([]string, 0, len(n.sinks))
	for _, s := range n.sinks {
		byName[s.hook.Name] = s
		names = append(names, s.hook.Name)
	}
	claimed, err := n.outbox.ClaimAlerts(ctx, n.owner, names, n.lease(), n.ownerGone)
	if err != nil {
		return r, fmt.Errorf("alert outbox: %w", err)
	}
	for _, a := range claimed {
		byName[a.Webhook].push(delivery{id: a.ID, kind: a.Kind, taskID: a.TaskID, body: a.Body})
		r.Queued++
	}
	return r, nil
}

// Result is what Close could deliver.
type Result struct {
	Delivered   int // alert deliveries a receiver accepted
	Undelivered int // deliveries given up: refused, out of attempts, or cut by the flush
}

// Close stops taking alerts and waits, at most Config.Flush, for the queued
// ones to be delivered; then it abandons the rest (their attempts are
// cancelled) and returns. It is safe to call more than once.
func (n *Notifier) Close() Result {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	deadline := time.NewTimer(n.cfg.Flush)
	defer deadline.Stop()
	for _, s := range n.sinks {
		s.close()
	}
	var r Result
	for _, s := range n.sinks {
		select {
		case <-s.done:
		case <-deadline.C:
			for _, s := range n.sinks {
				s.cancel()
			}
		}
		<-s.done
		d, u := s.counts()
		r.Delivered += d
		r.Undelivered += u
	}
	return r
}
