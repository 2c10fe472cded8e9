package purser

import "time"

// AlertKind is what an alert reports. The kinds, the payload formats and
// the webhooks are the domain's words (purser.yaml's alerts: section is
// read into them by config, and the alert package delivers what they
// describe), so that neither of those two packages imports the other.
type AlertKind string

// The kinds of alert, in rising severity.
const (
	// AlertWarning: a budget entered WARNING (passed its optimal line).
	AlertWarning AlertKind = "warning"
	// AlertWarningLine: a budget in WARNING passed its warning line, from
	// which staged degrade actions apply.
	AlertWarningLine AlertKind = "warning_line"
	// AlertHard: a budget reached its hard cap; the call in flight was
	// cancelled.
	AlertHard AlertKind = "hard"
	// AlertBlocked: a task stopped BLOCKED by its budget.
	AlertBlocked AlertKind = "blocked"
)

// AlertKinds lists every kind, in rising severity.
var AlertKinds = []AlertKind{AlertWarning, AlertWarningLine, AlertHard, AlertBlocked}

// AlertFormat is the shape of a webhook's payload.
type AlertFormat string

// The payload formats.
const (
	// AlertFormatJSON is Purser's own payload (see alert.Payload).
	AlertFormatJSON AlertFormat = "json"
	// AlertFormatSlack is {"text": …}, what Slack's, Mattermost's and most
	// chat tools' incoming webhooks take.
	AlertFormatSlack AlertFormat = "slack"
)

// AlertWebhook is one receiver of alerts.
type AlertWebhook struct {
	// Name identifies the webhook in messages; its URL is never printed (a
	// Slack webhook's URL is itself a secret).
	Name   string
	URL    string
	Format AlertFormat
	// Events are the kinds sent to it; empty is every kind.
	Events []AlertKind
}

// AlertConfig configures the delivery of alerts (alert.New). Zero
// durations and counts take the alert package's defaults.
type AlertConfig struct {
	Webhooks []AlertWebhook
	// Timeout bounds one delivery attempt (default 10s).
	Timeout time.Duration
	// MaxAttempts is how many times an alert is tried (default 5).
	MaxAttempts int
	// Backoff is the wait before the first retry; it doubles after each
	// failed attempt, up to MaxBackoff (defaults 1s and 30s).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Flush is how long the notifier's Close waits for alerts not yet
	// delivered before it gives up on them (default 5s): the most a dead
	// receiver can add to the end of a run. With an outbox, what it gave up
	// on is tried again at the next start.
	Flush time.Duration
	// MaxAge is how old an alert left in the outbox may be and still be
	// sent at a later start (default 24h); older ones expire.
	MaxAge time.Duration
	// MaxTotalAttempts is how many attempts an alert in the outbox gets in
	// all, across starts (default 4 × MaxAttempts); then it expires.
	MaxTotalAttempts int
}
