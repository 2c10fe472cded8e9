package proc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/budget"
)

// Issue 21: behind the door, the door books a CLI call's usage. A CLI's
// own requests that it never reports (here a title for the session, as
// Claude Code asks one of a small model) are booked, under their model;
// the CLI's stdout is a cross-check whose mismatch the call's note tells;
// and the CLI's own dollar figure is not booked on top of the door's
// tokens (no reported event). Without the door as the source, the ledger
// held only the turn the CLI reported (5,905 of the 5,958 tokens the mock
// billed) and Claude Code's reported total.
func TestTheDoorBooksRequestsTheCLIDoesNotReport(t *testing.T) {
	mock := backendtest.StartMock(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	script, err := filepath.Abs("testdata/titling-cli.py")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	b, err := claude.New(purser.BackendSpec{Type: "claude", Dir: ws, Options: map[string]any{"command": script,
		"budgetFence": false, "env": map[string]any{"HOME": t.TempDir(), "ANTHROPIC_BASE_URL": mock}}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var booked []budget.UsageEvent
	res, err := b.Call(t.Context(), purser.CallRequest{Model: "claude-sonnet-4-5", Prompt: "Create mock_out.txt.", Workspace: ws},
		func(ev budget.UsageEvent) {
			mu.Lock()
			booked = append(booked, ev)
			mu.Unlock()
		})
	if err != nil {
		t.Fatalf("call: %v (note %q)", err, res.Note)
	}
	byModel := map[string]int64{}
	var total int64
	for _, ev := range booked {
		byModel[ev.Model] += ev.Tokens()
		total += ev.Tokens()
		if ev.CostSource == budget.CostReported || ev.USD != 0 {
			t.Errorf("booked %+v: the CLI's own dollars are a cross-check, not booked", ev)
		}
	}
	// The mock bills a request with no tools 50+3, the turn 1300+100+4500
	// input and 5 output.
	if total != 5958 || byModel["claude-haiku-4-5"] != 53 || byModel["claude-sonnet-4-5"] != 5905 {
		t.Fatalf("booked %d tokens %v (%+v); want the mock's bill, 5958: 53 for the title (claude-haiku-4-5), 5905 for the turn", total, byModel, booked)
	}
	if !strings.Contains(res.Note, "reported $0.0123") {
		t.Errorf("note %q; want Claude Code's own figure kept in it as a cross-check", res.Note)
	}
	if want := "usage booked from the door: 5958 tokens in 2 replies; the CLI's own report said 5905 tokens"; !strings.Contains(res.Note, want) {
		t.Fatalf("note %q; want the cross-check %q", res.Note, want)
	}
}

// Behind the door, a reply the door booked live is in the journal too
// (journalled first): a reconciliation of the call against the ledger
// adds nothing for it, and one after Purser died before the ledger had it
// adds it once. The stand-in CLI holds its reply and reports nothing.
func TestTheDoorsBookedReplyIsNotRecoveredTwice(t *testing.T) {
	mock := backendtest.StartMock(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	script, err := filepath.Abs("testdata/holding-cli.py")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	b, err := claude.New(purser.BackendSpec{Type: "claude", Dir: ws, Options: map[string]any{"command": script,
		"env": map[string]any{"HOME": t.TempDir(), "HOLDING_API": "anthropic", "ANTHROPIC_BASE_URL": mock}}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var booked []budget.UsageEvent
	var journal string
	hooks := purser.CallHooks{OnWire: func(j string) { mu.Lock(); journal = j; mu.Unlock() }}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.Call(ctx, purser.CallRequest{Model: "m", Prompt: "Create mock_out.txt. MOCK_TOOL", Workspace: ws, Hooks: hooks},
			func(ev budget.UsageEvent) { mu.Lock(); booked = append(booked, ev); mu.Unlock() })
		done <- err
	}()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(ws, "replied")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the CLI had no reply within 60 s")
		}
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var tokens int64
	for _, ev := range booked {
		tokens += ev.Tokens()
	}
	if tokens != 5560 {
		t.Fatalf("the door booked %d tokens (%+v); want the mock's tool-call reply, 5560, though the CLI said nothing", tokens, booked)
	}
	recovered := func(recorded []budget.UsageEvent) int64 {
		got, err := b.RecoverSpend(t.Context(), purser.SpendQuery{Call: purser.CallRecord{ID: "c1", Model: "m", Wire: journal}, Workspace: ws, Recorded: recorded})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, ev := range got.Usage {
			n += ev.Tokens()
		}
		return n
	}
	if n := recovered(booked); n != 0 {
		t.Fatalf("the reconciliation against a ledger holding what the door booked adds %d tokens; want 0", n)
	}
	if n := recovered(nil); n != 5560 {
		t.Fatalf("with the ledger empty (Purser died before it): %d tokens recovered; want 5560 once", n)
	}
}
