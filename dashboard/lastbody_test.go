package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/dashboard"
)

// readCounter is a store that counts its reads of every task; it has no
// change mark (markedCounter passes the one of the store below).
type readCounter struct {
	purser.Store
	reads atomic.Int64
}

func (r *readCounter) Tasks(ctx context.Context) ([]purser.TaskRecord, error) {
	r.reads.Add(1)
	return r.Store.Tasks(ctx)
}

type markedCounter struct{ *readCounter }

func (m markedCounter) ChangeMark(ctx context.Context) (string, error) {
	return m.Store.(purser.ChangeMarker).ChangeMark(ctx)
}

func request(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// A poll or a scrape of a store nothing was committed to since the last is
// served without reading it again; a commit (here, a task added) is seen at
// the next one. A store with no change mark is read every time.
func TestAnUnchangedStoreIsNotReadAgain(t *testing.T) {
	for _, path := range []string{"/api/snapshot", "/metrics"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			rc := &readCounter{Store: filledStore(t)}
			h := dashboard.NewHandler(markedCounter{rc}, dashboard.Options{})
			first := request(t, h, path)
			once := rc.reads.Load() // /metrics, on a store wrapped like this, reads them more than once
			if again := request(t, h, path); again != first {
				t.Fatalf("the same store served two different bodies:\n%s\n%s", first, again)
			}
			if n := rc.reads.Load(); n != once {
				t.Fatalf("%d reads of the tasks for two requests of an unchanged store, want %d (the first's)", n, once)
			}
			at := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
			must(t, rc.Store.SaveTask(t.Context(), purser.TaskRecord{ID: "added", RunID: "run-1", Goal: "one more", State: purser.StateDone,
				Budget: budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(10)}}, CreatedAt: at, UpdatedAt: at}))
			after := request(t, h, path)
			if n := rc.reads.Load(); n != 2*once {
				t.Fatalf("%d reads after a commit, want %d", n, 2*once)
			}
			seen := strings.Contains(after, `"added"`) || strings.Contains(after, `purser_tasks{state="DONE",tier="optimal"} 1`)
			if !seen {
				t.Fatalf("the task committed is not in the next body:\n%s", after)
			}

			unmarked := &readCounter{Store: filledStore(t)}
			h = dashboard.NewHandler(unmarked, dashboard.Options{})
			request(t, h, path)
			once = unmarked.reads.Load()
			request(t, h, path)
			if n := unmarked.reads.Load(); n != 2*once {
				t.Fatalf("a store with no change mark was read %d times for two requests, want %d", n, 2*once)
			}
		})
	}
}

// A scrape after more usage is committed counts what was there and what
// was added, each once: on SQLite the breakdown adds the rows appended
// since (purser.BreakdownAfterStore) rather than summing the ledger again.
func TestAScrapeAfterACommitCountsTheNewRowsOnce(t *testing.T) {
	s := filledStore(t)
	h := dashboard.NewHandler(s, dashboard.Options{})
	before, ok := value(scrape(t, h), "purser_tokens_total", "type=input")
	if !ok {
		t.Fatal("no purser_tokens_total{type=input}")
	}
	at := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
	for i := range 3 {
		must(t, s.AppendUsage(t.Context(), purser.LedgerEntry{Key: fmt.Sprintf("more-%d", i), TaskID: "blocked", RunID: "run-1", At: at,
			Event: budget.UsageEvent{InputTokens: 7, CostSource: budget.CostReported, USD: 1}}))
		after, _ := value(scrape(t, h), "purser_tokens_total", "type=input")
		if want := before + float64(7*(i+1)); after != want {
			t.Fatalf("after %d more events of 7 input tokens: %v input tokens, want %v", i+1, after, want)
		}
	}
	// The same as a handler that never scraped before reads.
	fresh, _ := value(scrape(t, dashboard.NewHandler(s, dashboard.Options{})), "purser_tokens_total", "type=input")
	if fresh != before+21 {
		t.Fatalf("a fresh scrape says %v input tokens, want %v", fresh, before+21)
	}
}
