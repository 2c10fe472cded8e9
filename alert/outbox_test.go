package alert_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/alert"
)

// memOutbox is an AlertOutbox in memory, for the notifier's side of the
// contract (the stores' side is storetest's).
type memOutbox struct {
	mu   sync.Mutex
	rows []purser.OutboxAlert
}

func (o *memOutbox) find(id, webhook string) *purser.OutboxAlert {
	for i := range o.rows {
		if o.rows[i].ID == id && o.rows[i].Webhook == webhook {
			return &o.rows[i]
		}
	}
	return nil
}

func (o *memOutbox) AddAlerts(_ context.Context, owner string, _ time.Duration, alerts ...purser.OutboxAlert) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, a := range alerts {
		if o.find(a.ID, a.Webhook) == nil {
			a.State, a.Owner = purser.OutboxPending, owner
			o.rows = append(o.rows, a)
		}
	}
	return nil
}

func (o *memOutbox) ClaimAlerts(_ context.Context, owner string, webhooks []string, _ time.Duration, gone func(string) bool) ([]purser.OutboxAlert, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []purser.OutboxAlert
	for i, r := range o.rows {
		if r.State == purser.OutboxPending && slices.Contains(webhooks, r.Webhook) && (r.Owner == "" || r.Owner != owner && gone(r.Owner)) {
			o.rows[i].Owner = owner
			out = append(out, o.rows[i])
		}
	}
	return out, nil
}

func (o *memOutbox) AlertAttempted(_ context.Context, id, webhook string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r := o.find(id, webhook); r != nil {
		r.Attempts++
	}
	return nil
}

func (o *memOutbox) SettleAlert(_ context.Context, id, webhook string, state purser.OutboxState) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r := o.find(id, webhook); r != nil && (r.State == purser.OutboxPending || state == purser.OutboxDelivered) {
		r.State, r.Owner = state, ""
	}
	return nil
}

func (o *memOutbox) ExpireAlerts(_ context.Context, before time.Time, maxAttempts int) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for i, r := range o.rows {
		if r.State == purser.OutboxPending && (r.CreatedAt.Before(before) || r.Attempts >= maxAttempts) {
			o.rows[i].State, o.rows[i].Owner = purser.OutboxExpired, ""
			n++
		}
	}
	return n, nil
}

func (o *memOutbox) DeleteSettledAlerts(_ context.Context, before time.Time) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.rows)
	o.rows = slices.DeleteFunc(o.rows, func(r purser.OutboxAlert) bool {
		return r.State != purser.OutboxPending && r.CreatedAt.Before(before)
	})
	return n - len(o.rows), nil
}

func (o *memOutbox) OutboxAlerts(context.Context) ([]purser.OutboxAlert, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.rows), nil
}

// Every alert is in the outbox, pending under this process, with the very
// body the receiver gets, before its first attempt; the webhook is kept by
// name, never by URL; afterwards each stands as its delivery ended: taken,
// refused for good (404), or pending again after its attempts ran out.
func TestEachAlertIsInTheOutboxBeforeItsFirstAttempt(t *testing.T) {
	box := &memOutbox{}
	var mu sync.Mutex
	var unrecorded []string
	var rcv *receiver
	rcv = newReceiver(t, func(n int) int {
		r := rcv.got()[n-1]
		rows, _ := box.OutboxAlerts(t.Context())
		i := slices.IndexFunc(rows, func(a purser.OutboxAlert) bool { return a.ID == r.key })
		if i < 0 || rows[i].Webhook != "test" || !bytes.Equal(rows[i].Body, r.body) || rows[i].Attempts < 1 {
			mu.Lock()
			unrecorded = append(unrecorded, r.event)
			mu.Unlock()
		}
		switch r.event {
		case "warning":
			return http.StatusServiceUnavailable
		case "warning_line":
			return http.StatusNotFound
		}
		return http.StatusOK
	})
	cfg := fast(rcv.URL, alert.FormatJSON)
	cfg.MaxAttempts = 3
	n := alert.New(cfg, alert.Options{Outbox: box, Owner: "me 1 1"})
	for _, ev := range runawayEvents() {
		n.Observe(ev)
	}
	n.Close()
	if len(unrecorded) != 0 {
		t.Fatalf("attempts of %v came before their alert was in the outbox", unrecorded)
	}
	rows, _ := box.OutboxAlerts(t.Context())
	var got []string
	for _, r := range rows {
		if strings.Contains(r.Webhook, "127.0.0.1") || strings.Contains(string(r.Body), rcv.URL) {
			t.Fatalf("the webhook's URL reached the outbox: %+v", r)
		}
		got = append(got, fmt.Sprintf("%s:%s:%d:%s", r.Kind, r.State, r.Attempts, r.Owner))
	}
	want := []string{"warning:pending:3:", "warning_line:refused:1:", "hard:delivered:1:", "blocked:delivered:1:"}
	if !slices.Equal(got, want) {
		t.Fatalf("outbox holds %v, want %v", got, want)
	}
}

// Recover queues what an earlier process left, for a webhook still
// configured and a holder gone, ahead of any new alert, with its original
// key and body; too old or too often tried, it expires instead; another
// webhook's, or one a live process holds, it leaves alone.
func TestRecoverSendsWhatAKilledProcessLeftFirst(t *testing.T) {
	rcv := newReceiver(t, nil)
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	left := func(id, webhook, owner string, age time.Duration, attempts int) purser.OutboxAlert {
		return purser.OutboxAlert{ID: id, Webhook: webhook, Kind: "hard", TaskID: "t", Body: []byte(`{"id":"` + id + `"}`),
			CreatedAt: now.Add(-age), Attempts: attempts, State: purser.OutboxPending, Owner: owner}
	}
	box := &memOutbox{rows: []purser.OutboxAlert{
		left("old", "test", "dead 1 1", 25*time.Hour, 0),
		left("tried", "test", "dead 1 1", time.Hour, 20),
		left("killed", "test", "dead 1 1", time.Hour, 2),
		left("released", "test", "", time.Minute, 5),
		left("held", "test", "alive 2 2", time.Minute, 0),
		left("renamed", "gone-hook", "dead 1 1", time.Minute, 0),
	}}
	cfg := fast(rcv.URL, alert.FormatJSON) // MaxAttempts 5: 20 attempts in all
	n := alert.New(cfg, alert.Options{Outbox: box, Owner: "me 3 3", Now: func() time.Time { return now },
		OwnerGone: func(o string) bool { return o == "dead 1 1" }})
	rec, err := n.Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Queued != 2 || rec.Expired != 2 || rec.MaxAge != 24*time.Hour || rec.MaxTotalAttempts != 20 {
		t.Fatalf("Recover = %+v, want 2 queued, 2 expired (older than 24h, tried 20 times)", rec)
	}
	for _, ev := range runawayEvents()[:4] {
		n.Observe(ev)
	}
	n.Close()
	var keys []string
	for _, r := range rcv.got() {
		keys = append(keys, r.key)
		if r.key == "killed" && string(r.body) != `{"id":"killed"}` {
			t.Fatalf("the left alert was sent as %s, not its recorded body", r.body)
		}
	}
	if len(keys) != 3 || keys[0] != "killed" || keys[1] != "released" || !strings.HasPrefix(keys[2], "purser-") {
		t.Fatalf("receiver got %v, want killed, released, then the new warning", keys)
	}
	states := map[string]purser.OutboxState{}
	rows, _ := box.OutboxAlerts(t.Context())
	for _, r := range rows {
		states[r.ID] = r.State
	}
	for id, want := range map[string]purser.OutboxState{"old": purser.OutboxExpired, "tried": purser.OutboxExpired,
		"killed": purser.OutboxDelivered, "released": purser.OutboxDelivered, "held": purser.OutboxPending, "renamed": purser.OutboxPending} {
		if states[id] != want {
			t.Errorf("%s is %s, want %s", id, states[id], want)
		}
	}
}

// Recover deletes the alerts settled (delivered, refused, expired) and
// recorded more than KeepSettled ago, those it expires at this start
// included once that old; it keeps the younger settled ones, and every
// alert still pending, however old, until it is expired.
func TestRecoverDeletesWhatIsSettledAndOlderThanKeepSettled(t *testing.T) {
	rcv := newReceiver(t, nil)
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	old := alert.KeepSettled + time.Hour
	row := func(id string, state purser.OutboxState, age time.Duration, owner string) purser.OutboxAlert {
		return purser.OutboxAlert{ID: id, Webhook: "test", Kind: "hard", TaskID: "t", Body: []byte(`{"id":"` + id + `"}`),
			CreatedAt: now.Add(-age), State: state, Owner: owner}
	}
	box := &memOutbox{rows: []purser.OutboxAlert{
		row("old-delivered", purser.OutboxDelivered, old, ""),
		row("old-refused", purser.OutboxRefused, old, ""),
		row("old-expired", purser.OutboxExpired, old, ""),
		row("old-pending", purser.OutboxPending, old, "dead 1 1"), // expired now, then deleted: as old
		row("old-held", purser.OutboxPending, old, "alive 2 2"),   // expired now, then deleted: as old
		row("young-delivered", purser.OutboxDelivered, time.Hour, ""),
		row("young-expired", purser.OutboxExpired, 2*time.Hour, ""),
		row("killed", purser.OutboxPending, time.Hour, "dead 1 1"),
		row("held", purser.OutboxPending, time.Hour, "alive 2 2"),
	}}
	n := alert.New(fast(rcv.URL, alert.FormatJSON), alert.Options{Outbox: box, Owner: "me 3 3", Now: func() time.Time { return now },
		OwnerGone: func(o string) bool { return o == "dead 1 1" }})
	rec, err := n.Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if rec.Deleted != 5 || rec.Expired != 2 || rec.Queued != 1 {
		t.Fatalf("Recover = %+v, want 5 deleted, 2 expired, 1 queued", rec)
	}
	var left []string
	rows, _ := box.OutboxAlerts(t.Context())
	for _, r := range rows {
		left = append(left, r.ID+":"+string(r.State))
	}
	want := []string{"young-delivered:delivered", "young-expired:expired", "killed:delivered", "held:pending"}
	if !slices.Equal(left, want) {
		t.Fatalf("the outbox holds %v, want %v", left, want)
	}
}
