package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/dashboard"
	"github.com/purser-dev/purser/sqlite"
)

// scaleTasks and scaleCalls fix the shape of the page at every ledger size:
// the same tasks and calls, only more events per call, so the snapshot and
// the scrape are the same bytes at 10⁵ and 10⁶ events and any growth
// between them is the ledger's.
const (
	scaleTasks = 20
	scaleCalls = 50 // per task
)

// scaleStore is a SQLite store of one run of scaleTasks tasks of scaleCalls
// calls each, events ledger entries in all: task-00 is BLOCKED at its hard
// token cap, the others RUNNING. b is the benchmark whose sub-benchmarks
// share it (it runs once), so the store lives as long as they do.
func scaleStore(b *testing.B, events int) purser.Store {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "purser.db"))
	must(b, err)
	b.Cleanup(func() { s.Close() })
	at := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	perCall := events / (scaleTasks * scaleCalls)
	must(b, s.SaveRun(ctx, purser.Run{ID: "run-1", Budget: &budget.Config{Hard: budget.HardLimits{USD: ptr(budget.Dollars(1_000_000)), MaxIterations: ptr(1000)}}}))
	for i := range scaleTasks {
		id := fmt.Sprintf("task-%02d", i)
		cfg := budget.Config{Optimal: budget.Limits{Tokens: ptr(int64(100_000))}, Hard: budget.HardLimits{Tokens: ptr(int64(1_000_000_000)), MaxIterations: ptr(100)}}
		state := purser.StateRunning
		if i == 0 {
			// Crosses its hard cap half way through its ledger.
			cfg.Hard.Tokens = ptr(int64(perCall * scaleCalls * 110 / 2))
			state = purser.StateBlocked
		}
		must(b, s.SaveTask(ctx, purser.TaskRecord{ID: id, RunID: "run-1", Goal: "goal of " + id, Budget: cfg, State: state, CreatedAt: at, UpdatedAt: at.Add(time.Hour)}))
		entries := make([]purser.LedgerEntry, 0, perCall*scaleCalls)
		for c := range scaleCalls {
			callID := fmt.Sprintf("%s-c%02d", id, c)
			start := at.Add(time.Duration(c) * time.Minute)
			must(b, s.SaveCall(ctx, purser.CallRecord{ID: callID, TaskID: id, Iteration: c/5 + 1, Kind: purser.CallMain, Attempt: 1, Model: "m",
				StartedAt: start, EndedAt: start.Add(time.Minute - time.Second), Outcome: purser.CallOK}))
			for k := range perCall {
				entries = append(entries, purser.LedgerEntry{Key: fmt.Sprintf("%s-%d", callID, k), TaskID: id, RunID: "run-1", CallID: callID, Iteration: c/5 + 1,
					Kind: purser.CallMain, At: start.Add(time.Duration(k) * time.Millisecond),
					Event: budget.UsageEvent{Model: "m", InputTokens: 100, OutputTokens: 10, CacheReadTokens: 50, USD: 1000, CostSource: budget.CostReported}})
			}
		}
		for len(entries) > 0 {
			n := min(len(entries), 10_000)
			must(b, s.AppendUsage(ctx, entries[:n]...))
			entries = entries[n:]
		}
	}
	return s
}

// BenchmarkScale measures one GET of /api/snapshot and of /metrics over
// loopback HTTP, against a static file of the same bytes served from memory
// by the same HTTP server and client (static-*), over a store of 10⁵ and 10⁶
// ledger events, in the same run: the ratio is the figure. While nothing is
// committed the handler serves what it last read (purser.ChangeMarker);
// *-after-a-commit commits one usage event before each request, so each
// reads the store. metrics-cold is the first scrape of a handler that has
// never scraped.
func BenchmarkScale(b *testing.B) {
	for _, events := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			s := scaleStore(b, events)
			h := dashboard.NewHandler(s, dashboard.Options{})
			for _, path := range []string{"/api/snapshot", "/metrics"} {
				body := get(b, serve(b, h), path)
				b.Run(path[1:], func(b *testing.B) {
					url := serve(b, h)
					b.ReportAllocs()
					for b.Loop() {
						get(b, url, path)
					}
				})
				static := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.ServeContent(w, r, "static", time.Time{}, bytes.NewReader(body))
				})
				b.Run("static-"+path[1:], func(b *testing.B) {
					url := serve(b, static)
					b.ReportAllocs()
					b.SetBytes(int64(len(body)))
					for b.Loop() {
						get(b, url, path)
					}
				})
			}
			// The same requests with a commit before each (one usage
			// event): the page is read from the store every time, as it
			// is while tasks run.
			for _, path := range []string{"/api/snapshot", "/metrics"} {
				b.Run(path[1:]+"-after-a-commit", func(b *testing.B) {
					url := serve(b, h)
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						b.StopTimer()
						i++
						must(b, s.AppendUsage(context.Background(), purser.LedgerEntry{Key: fmt.Sprintf("commit-%s-%d", path, i), TaskID: "task-01", RunID: "run-1",
							CallID: "task-01-c00", Iteration: 1, Kind: purser.CallMain, At: time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC),
							Event: budget.UsageEvent{Model: "m", InputTokens: 1, CostSource: budget.CostReported, USD: 1}}))
						b.StartTimer()
						get(b, url, path)
					}
				})
			}
			b.Run("metrics-cold", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					url := serve(b, dashboard.NewHandler(s, dashboard.Options{}))
					b.StartTimer()
					get(b, url, "/metrics")
				}
			})
		})
	}
}

// serve serves h on loopback until b ends and returns its URL.
func serve(b *testing.B, h http.Handler) string {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv.URL
}

// get GETs url+path over a kept-alive connection and returns the body,
// failing on any status but 200.
func get(b *testing.B, url, path string) []byte {
	req, err := http.NewRequest("GET", url+path, nil)
	must(b, err)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	req.Header.Set("Accept-Encoding", "identity") // both sides send the bytes as they are
	resp, err := http.DefaultClient.Do(req)
	must(b, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(b, err)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return body
}
