package main

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	dir := demoWithAlerts(t, alerts)
	cmd := exec.Command(buildPurser(t), "run", "--json", "--db", filepath.Join(t.TempDir(), "p.db"), "runaway.yaml")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	return exitCode(t, cmd.Run()), stderr.String()
}

// demoWithAlerts copies the demo into a new directory and adds alerts (an
// alerts: section) to its purser.yaml; it returns the directory.
func demoWithAlerts(t *testing.T, alerts string) string {
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
	unboxWhereNoBox(t, dir)
	return dir
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
	dir := demoWithAlerts(t, "alerts:\n  webhooks:\n    - {name: ops, url: "+rcv.URL+"}\n")
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

// A purser killed (SIGKILL) while its receiver still refused every alert,
// holding the HARD one unanswered, loses none of them: the next command,
// purser resume, delivers each alert the killed one had queued, HARD
// included, exactly once and under its original Idempotency-Key; and the
// command after that delivers nothing again.
func TestAlertsQueuedBeforeAKillAreDeliveredByTheNextCommand(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	accepting := false
	refusedKeys := map[string]string{} // key → event, refused before the kill
	accepted := map[string]int{}       // key → times taken after it
	acceptedEvent := map[string]string{}
	hardSeen := make(chan struct{})
	killed := make(chan struct{})
	var hardOnce sync.Once
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, event := r.Header.Get("Idempotency-Key"), r.Header.Get("X-Purser-Event")
		mu.Lock()
		if accepting {
			accepted[key]++
			acceptedEvent[key] = event
			mu.Unlock()
			return
		}
		refusedKeys[key] = event
		mu.Unlock()
		if event == "hard" {
			// Hold the HARD alert's request unanswered until the process
			// that sent it is dead.
			hardOnce.Do(func() { close(hardSeen) })
			<-killed
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer rcv.Close()
	dir := demoWithAlerts(t, "alerts:\n  timeout: 5m\n  backoff: 10ms\n  maxAttempts: 2\n  flush: 5m\n  webhooks:\n    - {name: ops, url: "+rcv.URL+"}\n")
	db := filepath.Join(t.TempDir(), "p.db")
	bin := buildPurser(t)

	run := exec.Command(bin, "run", "--json", "--db", db, "runaway.yaml")
	run.Dir = dir
	var runOut bytes.Buffer
	run.Stdout, run.Stderr = io.Discard, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	select {
	case <-hardSeen:
	case err := <-exited:
		close(killed)
		t.Fatalf("purser run ended (%v) before it sent its HARD alert:\n%s", err, runOut.String())
	case <-time.After(3 * time.Minute):
		t.Fatal("no HARD alert reached the receiver")
	}
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	mu.Lock()
	accepting = true
	before := maps.Clone(refusedKeys)
	mu.Unlock()
	close(killed)

	var hardKey string
	for k, ev := range before {
		if ev == "hard" {
			hardKey = k
		}
	}
	if len(before) < 3 || hardKey == "" {
		t.Fatalf("before the kill the receiver refused %v; want warning, warning_line and hard", before)
	}
	resume := func() string {
		t.Helper()
		cmd := exec.Command(bin, "resume", "runaway", "--db", db)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		code := exitCode(t, cmd.Run())
		t.Logf("resume: exit %d", code)
		return out.String()
	}
	out := resume()
	if !strings.Contains(out, "an earlier run did not deliver") {
		t.Errorf("resume did not say it delivers what the killed run left:\n%s", out)
	}
	mu.Lock()
	for k, ev := range before {
		if accepted[k] != 1 {
			t.Errorf("%s alert %s, refused before the kill, was taken %d times after it, want once", ev, k, accepted[k])
		}
	}
	for k, n := range accepted {
		if n != 1 {
			t.Errorf("%s alert %s taken %d times", acceptedEvent[k], k, n)
		}
	}
	afterFirst := maps.Clone(accepted)
	mu.Unlock()
	if t.Failed() {
		t.Fatalf("resume output:\n%s", out)
	}

	out = resume()
	mu.Lock()
	defer mu.Unlock()
	if !maps.Equal(accepted, afterFirst) {
		t.Fatalf("a second resume delivered again: %v, after the first %v\n%s", accepted, afterFirst, out)
	}
}
