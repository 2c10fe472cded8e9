package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// hookRequest is one request a webhook receiver got.
type hookRequest struct {
	key, event string
	status     int
}

// runRunawayWithAlerts runs the demo's runaway task (OPTIMAL → WARNING →
// past its warning line → HARD → BLOCKED) with purser.yaml's alerts:
// pointing at url, and returns the exit code and stderr.
func runRunawayWithAlerts(t *testing.T, alerts string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(mustAbs("../../examples/demo"))); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(dir, "purser.yaml")
	data, err := os.ReadFile(proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(proj, append(data, []byte(alerts)...), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildPurser(t), "run", "--json", "--db", filepath.Join(t.TempDir(), "p.db"), "runaway.yaml")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	return exitCode(t, cmd.Run()), stderr.String()
}

// A sim run that goes OPTIMAL → WARNING → HARD → BLOCKED: a receiver that
// fails its first two requests still takes every tier event exactly once.
func TestAlertsEveryTierEventOnceFromASimRun(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []hookRequest
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		status := http.StatusOK
		if len(got) < 2 {
			status = http.StatusServiceUnavailable
		}
		got = append(got, hookRequest{key: r.Header.Get("Idempotency-Key"), event: r.Header.Get("X-Purser-Event"), status: status})
		w.WriteHeader(status)
	}))
	defer rcv.Close()
	code, stderr := runRunawayWithAlerts(t, "alerts:\n  backoff: 10ms\n  flush: 1m\n  webhooks:\n    - {name: ops, url: "+rcv.URL+"}\n")
	if code != exitBudgetStop {
		t.Fatalf("exit %d, want 3 (BLOCKED); stderr:\n%s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	taken := map[string]int{}
	var kinds []string
	for _, r := range got {
		if r.status != http.StatusOK {
			continue
		}
		if taken[r.key]++; taken[r.key] == 1 {
			kinds = append(kinds, r.event)
		}
	}
	if want := "warning,warning_line,hard,blocked"; strings.Join(kinds, ",") != want || len(got) != 6 {
		t.Fatalf("receiver took %v in %d requests, want %s each once (after two failures); requests: %+v", kinds, len(got), want, got)
	}
	if got[0].key != got[1].key || got[1].key != got[2].key {
		t.Fatalf("the retries of the first alert carry different keys: %+v", got[:3])
	}
	if strings.Contains(stderr, "not delivered") {
		t.Fatalf("stderr says an alert was lost: %s", stderr)
	}
}

// A receiver that never answers delays the end of the run by at most the
// configured flush, and the run says what was not delivered.
func TestAlertsDeadReceiverBoundedByFlush(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer dead.Close()
	defer close(release)
	start := time.Now()
	// Without the flush, 4 alerts × 5 attempts × a 30s timeout would hold
	// the run for 10 minutes.
	code, stderr := runRunawayWithAlerts(t, "alerts:\n  timeout: 30s\n  flush: 300ms\n  webhooks:\n    - {name: dead, url: "+dead.URL+"}\n")
	took := time.Since(start)
	if code != exitBudgetStop {
		t.Fatalf("exit %d, want 3 (BLOCKED); stderr:\n%s", code, stderr)
	}
	if took > 2*time.Minute {
		t.Fatalf("the run took %s with a dead receiver and a 300ms flush", took)
	}
	if !strings.Contains(stderr, "webhook dead not delivered") || strings.Contains(stderr, dead.URL) {
		t.Fatalf("stderr should name the webhook, not its URL:\n%s", stderr)
	}
}

// A resumed task starts from the tier the database holds: a resume refused
// at the hard cap announces nothing again; one with a raised budget
// announces its new HARD and BLOCKED, and nothing it had already passed.
func TestAlertsOnResume(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var kinds []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		kinds = append(kinds, r.Header.Get("X-Purser-Event"))
	}))
	defer rcv.Close()
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(kinds, ",")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(mustAbs("../../examples/demo"))); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "purser.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("alerts:\n  webhooks:\n    - {name: ops, url: " + rcv.URL + "}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, "raise.yaml"), []byte("optimal: {usd: 0.3, tokens: 60000}\nwarning: {usd: 0.6}\nhard: {usd: 1.5, tokens: 200000, maxIterations: 8}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "p.db")
	purser := func(args ...string) (int, string) {
		cmd := exec.Command(buildPurser(t), append(args, "--db", db)...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		return exitCode(t, cmd.Run()), out.String()
	}

	if code, out := purser("run", "runaway.yaml"); code != exitBudgetStop || seen() != "warning,warning_line,hard,blocked" {
		t.Fatalf("run: exit %d, alerts %q\n%s", code, seen(), out)
	}
	if code, out := purser("resume", "runaway"); code != exitBudgetStop || seen() != "warning,warning_line,hard,blocked" {
		t.Fatalf("resume refused at the cap: exit %d, alerts %q, want none new\n%s", code, seen(), out)
	}
	if code, out := purser("resume", "runaway", "--budget", "raise.yaml"); code != exitBudgetStop || seen() != "warning,warning_line,hard,blocked,hard,blocked" {
		t.Fatalf("resume with a raise: exit %d, alerts %q, want a new hard and blocked\n%s", code, seen(), out)
	}
}
