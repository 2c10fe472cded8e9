package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

func outboxAlert(id, webhook string, at time.Time) purser.OutboxAlert {
	return purser.OutboxAlert{ID: id, Webhook: webhook, Kind: "hard", TaskID: "t", Body: []byte(`{"id":"` + id + `"}`), CreatedAt: at}
}

func ids(alerts []purser.OutboxAlert) []string {
	out := []string{}
	for _, a := range alerts {
		out = append(out, a.ID+"@"+a.Webhook)
	}
	return out
}

// An alert is recorded held by the process that queued it: another handle
// takes it only once that owner is gone or its lease has run out, and only
// for a webhook it asks for; attempts add up, delivered is final, a release
// makes it claimable at once, and the old and the out of attempts expire.
func testAlertOutboxLifecycle(t *testing.T, open Opener) {
	ctx := t.Context()
	a, b := open(t), open(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	alive := func(string) bool { return false }
	gone := func(string) bool { return true }
	first, second := outboxAlert("k1", "ops", now), outboxAlert("k2", "ops", now.Add(time.Second))
	if err := a.AddAlerts(ctx, "host 1 1", time.Hour, first, second, outboxAlert("k1", "chat", now)); err != nil {
		t.Fatal(err)
	}
	// Recorded again (a replay): left as it is.
	if err := a.AddAlerts(ctx, "host 9 9", time.Hour, outboxAlert("k1", "ops", now.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	all, err := b.OutboxAlerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(all); !slices.Equal(got, []string{"k1@ops", "k1@chat", "k2@ops"}) && !slices.Equal(got, []string{"k1@chat", "k1@ops", "k2@ops"}) {
		t.Fatalf("outbox holds %v", got)
	}
	for _, r := range all {
		if r.State != purser.OutboxPending || r.Owner != "host 1 1" || !r.CreatedAt.Equal(now) && r.ID == "k1" {
			t.Fatalf("recorded %+v, want pending under host 1 1 at %s", r, now)
		}
	}
	if got, err := b.ClaimAlerts(ctx, "host 2 2", []string{"ops"}, time.Hour, alive); err != nil || len(got) != 0 {
		t.Fatalf("claimed %v (%v) from a live owner", ids(got), err)
	}
	got, err := b.ClaimAlerts(ctx, "host 2 2", []string{"ops"}, time.Hour, gone)
	if err != nil || !slices.Equal(ids(got), []string{"k1@ops", "k2@ops"}) {
		t.Fatalf("claimed %v (%v) from a gone owner, want k1@ops k2@ops, oldest first", ids(got), err)
	}
	if string(got[0].Body) != `{"id":"k1"}` || got[0].Kind != "hard" || got[0].TaskID != "t" || got[0].Owner != "host 2 2" {
		t.Fatalf("claimed %+v", got[0])
	}
	// Now held by host 2 2, which is alive, and by itself.
	if got, err := a.ClaimAlerts(ctx, "host 2 2", []string{"ops"}, time.Hour, gone); err != nil || len(got) != 0 {
		t.Fatalf("an owner claimed its own alerts again: %v (%v)", ids(got), err)
	}
	checkOutboxSettleAndExpire(t, a, b, now, alive)
}

// checkOutboxSettleAndExpire goes on from testAlertOutboxLifecycle: k1@ops
// and k2@ops held by "host 2 2" through b, k1@chat pending under "host 1 1".
func checkOutboxSettleAndExpire(t *testing.T, a, b Store, now time.Time, alive func(string) bool) {
	ctx := t.Context()
	for range 3 {
		if err := b.AlertAttempted(ctx, "k1", "ops"); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SettleAlert(ctx, "k1", "ops", purser.OutboxDelivered); err != nil {
		t.Fatal(err)
	}
	if err := b.SettleAlert(ctx, "k1", "ops", purser.OutboxPending); err != nil {
		t.Fatal(err)
	}
	// A release: claimable at once by another live process.
	if err := b.SettleAlert(ctx, "k2", "ops", purser.OutboxPending); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ClaimAlerts(ctx, "host 3 3", []string{"ops", "chat"}, time.Millisecond, alive); err != nil || !slices.Equal(ids(got), []string{"k2@ops"}) {
		t.Fatalf("after a release claimed %v (%v), want k2@ops alone (k1@chat is held, k1@ops delivered)", ids(got), err)
	}
	// A lease run out: claimable although its owner is alive.
	time.Sleep(20 * time.Millisecond)
	if got, err := b.ClaimAlerts(ctx, "host 4 4", []string{"ops"}, time.Hour, alive); err != nil || !slices.Equal(ids(got), []string{"k2@ops"}) {
		t.Fatalf("after the lease ran out claimed %v (%v), want k2@ops", ids(got), err)
	}
	if err := b.SettleAlert(ctx, "k2", "ops", purser.OutboxRefused); err != nil {
		t.Fatal(err)
	}
	// Expiry: by age (k1@chat is older than the cut), then by attempts.
	if err := a.AddAlerts(ctx, "", 0, outboxAlert("k3", "ops", now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ExpireAlerts(ctx, now.Add(time.Minute), 5); err != nil || n != 1 {
		t.Fatalf("expired %d by age (%v), want 1 (k1@chat)", n, err)
	}
	for range 2 {
		if err := a.AlertAttempted(ctx, "k3", "ops"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := a.ExpireAlerts(ctx, now, 2); err != nil || n != 1 {
		t.Fatalf("expired %d by attempts (%v), want 1 (k3)", n, err)
	}
	all, err := b.OutboxAlerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, r := range all {
		states[r.ID+"@"+r.Webhook] = fmt.Sprintf("%s/%d", r.State, r.Attempts)
	}
	want := map[string]string{"k1@ops": "delivered/3", "k1@chat": "expired/0", "k2@ops": "refused/0", "k3@ops": "expired/2"}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Fatalf("outbox states %v, want %v", states, want)
	}
}

// Claimers on several handles at once (processes draining one outbox)
// share the unheld alerts between them: each alert goes to exactly one.
func testAlertClaimsAreExclusive(t *testing.T, open Opener) {
	ctx := t.Context()
	const claimers, alerts = 6, 40
	seed := open(t)
	now := time.Now()
	var batch []purser.OutboxAlert
	for i := range alerts {
		batch = append(batch, outboxAlert(fmt.Sprintf("k%02d", i), "ops", now.Add(time.Duration(i)*time.Millisecond)))
	}
	if err := seed.AddAlerts(ctx, "host dead 0", time.Hour, batch...); err != nil {
		t.Fatal(err)
	}
	deadOnly := func(owner string) bool { return owner == "host dead 0" }
	stores := make([]Store, claimers)
	for i := range stores {
		stores[i] = open(t)
	}
	var mu sync.Mutex
	taken := map[string][]string{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			owner := fmt.Sprintf("host %d 1", i)
			got, err := s.ClaimAlerts(ctx, owner, []string{"ops"}, time.Hour, deadOnly)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, a := range got {
				taken[a.ID] = append(taken[a.ID], owner)
			}
		}()
	}
	close(start)
	wg.Wait()
	for id, by := range taken {
		if len(by) != 1 {
			t.Errorf("alert %s claimed by %v", id, by)
		}
	}
	if len(taken) != alerts {
		t.Fatalf("%d of %d alerts claimed", len(taken), alerts)
	}
}

// The alerts settled (delivered, refused, expired) and recorded before the
// cut are deleted, by any handle; younger settled ones stay, and so does a
// pending alert however old, held or not, until it is expired.
func testSettledAlertsAreDeleted(t *testing.T, open Opener) {
	ctx := t.Context()
	a, b := open(t), open(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	old, young := now.Add(-30*24*time.Hour), now.Add(-time.Hour)
	if err := a.AddAlerts(ctx, "host 1 1", time.Hour,
		outboxAlert("delivered", "ops", old), outboxAlert("refused", "ops", old), outboxAlert("expired", "ops", old),
		outboxAlert("pending", "ops", old), outboxAlert("held", "chat", old),
		outboxAlert("delivered", "chat", young), outboxAlert("expired", "chat", young), outboxAlert("pending", "chat", young)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		id, webhook string
		state       purser.OutboxState
	}{{"delivered", "ops", purser.OutboxDelivered}, {"refused", "ops", purser.OutboxRefused}, {"delivered", "chat", purser.OutboxDelivered}} {
		if err := a.SettleAlert(ctx, s.id, s.webhook, s.state); err != nil {
			t.Fatal(err)
		}
	}
	for _, hook := range []string{"ops", "chat"} {
		for range 3 {
			if err := a.AlertAttempted(ctx, "expired", hook); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, err := a.ExpireAlerts(ctx, old.Add(-time.Hour), 3); err != nil || n != 2 {
		t.Fatalf("expired %d by attempts (%v), want 2 (expired@ops, expired@chat)", n, err)
	}
	cut := now.Add(-7 * 24 * time.Hour)
	if n, err := b.DeleteSettledAlerts(ctx, cut); err != nil || n != 3 {
		t.Fatalf("deleted %d settled alerts before the cut (%v), want 3 (delivered@ops, refused@ops, expired@ops)", n, err)
	}
	all, err := a.OutboxAlerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]string{}
	for _, r := range all {
		left[r.ID+"@"+r.Webhook] = string(r.State)
	}
	want := map[string]string{"pending@ops": "pending", "held@chat": "pending", "delivered@chat": "delivered", "expired@chat": "expired", "pending@chat": "pending"}
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Fatalf("after the deletion the outbox holds %v, want %v", left, want)
	}
	if n, err := a.DeleteSettledAlerts(ctx, cut); err != nil || n != 0 {
		t.Fatalf("deleted %d again (%v), want 0", n, err)
	}
}
