package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/alert"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/postgres/pgtest"
)

// Two processes starting at once on one database (two workers of a fleet,
// each with its own connections) both drain the outbox a killed process
// left: every alert reaches the receiver exactly once, and ends delivered.
func TestAlertOutboxTwoDrainersSendEachAlertOnce(t *testing.T) {
	t.Parallel()
	for _, db := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "p.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.NewSchema(t) }},
	} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			path := db.path(t)
			open := func() app.Store {
				t.Helper()
				s, err := app.OpenStore(t.Context(), app.Database{Path: path}, true)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			const alerts = 30
			const dead = "host-gone 1 1"
			var mu sync.Mutex
			got := map[string]int{}
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(time.Millisecond) // the drains overlap in time
				mu.Lock()
				defer mu.Unlock()
				got[r.Header.Get("Idempotency-Key")]++
			}))
			defer rcv.Close()

			seed := open()
			now := time.Now()
			var left []purser.OutboxAlert
			for i := range alerts {
				id := fmt.Sprintf("purser-dead-%d", i)
				left = append(left, purser.OutboxAlert{ID: id, Webhook: "ops", Kind: "hard", TaskID: "t",
					Body: []byte(`{"id":"` + id + `"}`), CreatedAt: now.Add(time.Duration(i) * time.Millisecond)})
			}
			if err := seed.AddAlerts(t.Context(), dead, time.Hour, left...); err != nil {
				t.Fatal(err)
			}

			cfg := alert.Config{Webhooks: []alert.Webhook{{Name: "ops", URL: rcv.URL, Format: alert.FormatJSON}}, Flush: time.Minute}
			var wg sync.WaitGroup
			start := make(chan struct{})
			queued := make([]int, 2)
			for i := range 2 {
				s := open()
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					n := alert.New(cfg, alert.Options{Outbox: s, Owner: fmt.Sprintf("drainer-%d 1 1", i),
						OwnerGone: func(o string) bool { return o == dead }})
					rec, err := n.Recover(t.Context())
					if err != nil {
						t.Error(err)
					}
					queued[i] = rec.Queued
					if res := n.Close(); res.Undelivered != 0 {
						t.Errorf("drainer %d: %d undelivered", i, res.Undelivered)
					}
				}()
			}
			close(start)
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			for _, a := range left {
				if got[a.ID] != 1 {
					t.Errorf("alert %s sent %d times, want once", a.ID, got[a.ID])
				}
			}
			if len(got) != alerts || queued[0]+queued[1] != alerts {
				t.Fatalf("receiver got %d keys; the drainers queued %v; want %d in all", len(got), queued, alerts)
			}
			rows, err := seed.OutboxAlerts(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.State != purser.OutboxDelivered || r.Attempts != 1 || r.Owner != "" {
					t.Fatalf("after the drains %s is %s after %d attempts, held by %q; want delivered after 1, released", r.ID, r.State, r.Attempts, r.Owner)
				}
			}
			t.Logf("the drainers queued %v", queued)
		})
	}
}
