package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A task a worker runs sends purser.yaml's alerts as purser run does: the
// demo's runaway task, submitted to a SQLite queue and drained by one
// worker, reaches the receiver as warning, warning_line, hard and blocked,
// each once.
func TestWorkerSendsTheTasksAlerts(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	taken := map[string]int{}
	var kinds []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if taken[r.Header.Get("Idempotency-Key")]++; taken[r.Header.Get("Idempotency-Key")] == 1 {
			kinds = append(kinds, r.Header.Get("X-Purser-Event"))
		}
	}))
	defer rcv.Close()
	dir := demoWithAlerts(t, "alerts:\n  backoff: 10ms\n  flush: 1m\n  webhooks:\n    - {name: ops, url: "+rcv.URL+"}\n")
	db := filepath.Join(t.TempDir(), "queue.db")
	bin := buildPurser(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("purser %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	run("submit", "--db", db, "--run", "alerting", "runaway.yaml")
	out := run("worker", "--db", db, "--drain")
	if !strings.Contains(out, "BLOCKED") {
		t.Fatalf("the worker did not report the task BLOCKED:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "warning,warning_line,hard,blocked"; strings.Join(kinds, ",") != want {
		t.Fatalf("receiver took %v, want %s each once\nworker:\n%s", kinds, want, out)
	}
	for key, n := range taken {
		if n != 1 {
			t.Errorf("alert %s sent %d times", key, n)
		}
	}
}
