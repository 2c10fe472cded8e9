package purser

import (
	"context"
	"time"
)

// OutboxState is where an alert recorded for delivery stands.
type OutboxState string

// The outbox states. Pending is the only one that is delivered (again).
const (
	// OutboxPending: not delivered yet; tried again at the next start of a
	// command that sends alerts, until it expires.
	OutboxPending OutboxState = "pending"
	// OutboxDelivered: a receiver accepted it.
	OutboxDelivered OutboxState = "delivered"
	// OutboxRefused: the receiver refused it for good (a 4xx other than
	// 408 and 429); never tried again.
	OutboxRefused OutboxState = "refused"
	// OutboxExpired: too old, or out of attempts, to be worth sending.
	OutboxExpired OutboxState = "expired"
)

// OutboxAlert is one alert for one webhook, as the alert outbox keeps it.
type OutboxAlert struct {
	// ID is the alert's idempotency key, sent on every attempt.
	ID string
	// Webhook is the webhook's stable key: its configured name, never its
	// URL (a Slack webhook's URL is itself a secret).
	Webhook string
	Kind    string // the event: warning, warning_line, hard, blocked
	TaskID  string
	// Body is the request body the webhook receives, secrets already
	// removed: a replay sends the very bytes the first attempt sent.
	Body      []byte
	CreatedAt time.Time
	// Attempts counts the delivery attempts started, across processes.
	Attempts int
	State    OutboxState
	// Owner is the process that holds the alert to deliver it ("" when
	// none holds it).
	Owner string
}

// AlertOutbox is a store that keeps alerts until they are delivered, so
// that an alert queued by a process that was then killed is delivered by
// the next one. Both stores implement it; the alert package takes it as
// an interface.
type AlertOutbox interface {
	// AddAlerts records alerts as pending, held by owner for lease (the
	// process that queued them delivers them). An alert already recorded
	// (same ID and Webhook) is left as it is.
	AddAlerts(ctx context.Context, owner string, lease time.Duration, alerts ...OutboxAlert) error
	// ClaimAlerts holds for owner, for lease, every pending alert for one
	// of webhooks that nobody holds (never held, released, held past its
	// lease, or held by another owner ownerGone says is gone), oldest
	// first, and returns them. Claims are atomic: claimers at once never
	// get the same alert.
	ClaimAlerts(ctx context.Context, owner string, webhooks []string, lease time.Duration, ownerGone func(owner string) bool) ([]OutboxAlert, error)
	// AlertAttempted counts one more delivery attempt of an alert; it is
	// called before the attempt, so an attempt cut by a kill counts.
	AlertAttempted(ctx context.Context, id, webhook string) error
	// SettleAlert records where an alert now stands and releases its hold.
	// A delivered alert stays delivered; any other state only replaces
	// pending.
	SettleAlert(ctx context.Context, id, webhook string, state OutboxState) error
	// ExpireAlerts marks expired the pending alerts recorded before
	// before, or already attempted maxAttempts times or more, and returns
	// how many it marked.
	ExpireAlerts(ctx context.Context, before time.Time, maxAttempts int) (int, error)
	// DeleteSettledAlerts deletes the alerts no longer pending (delivered,
	// refused or expired) recorded before before, and returns how many it
	// deleted. Nothing sends them again: kept for ever, they only grow the
	// outbox. A pending alert is never deleted (ExpireAlerts settles it
	// first).
	DeleteSettledAlerts(ctx context.Context, before time.Time) (int, error)
	// OutboxAlerts lists every recorded alert, oldest first.
	OutboxAlerts(ctx context.Context) ([]OutboxAlert, error)
}
