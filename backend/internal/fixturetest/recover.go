package fixturetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// SessionFile is a captured CLI session file, for the tests of a backend's
// purser.SpendRecoverer.
type SessionFile struct {
	Fixture string // its name under testdata
	// Place returns where the CLI would keep the session file under home
	// (the n-th session of the same workspace, from 0), creating whatever
	// else the CLI keeps beside it.
	Place     func(t testing.TB, home string, n int) string
	Workspace string    // the directory the file says the CLI ran in
	Started   time.Time // when the file says the session started
	Tokens    int64     // the tokens it holds
}

// RecoverSpend proves a backend's SpendRecoverer (made by newRecoverer with
// home as the CLI's home) against a captured session file: from a recorded
// file it returns what the file holds beyond the ledger, and nothing twice;
// a file not recorded is located by its workspace and start time — and not
// taken when another call claims it, when it started before the call, when
// it is another workspace's, or when two files fit.
func RecoverSpend(t *testing.T, f SessionFile, newRecoverer func(t testing.TB, home string) purser.SpendRecoverer) {
	data, err := os.ReadFile(filepath.Join("testdata", f.Fixture))
	if err != nil {
		t.Fatal(err)
	}
	place := func(t *testing.T, home string, n int) string {
		p := f.Place(t, home, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokens := func(evs []budget.UsageEvent) int64 {
		var tot budget.Totals
		for _, ev := range evs {
			if err := ev.Validate(); err != nil {
				t.Fatalf("invalid event %+v: %v", ev, err)
			}
			tot.Add(ev)
		}
		return tot.Tokens
	}
	before := f.Started.Add(-time.Minute)
	call := purser.CallRecord{ID: "c", StartedAt: before}
	recover := func(t *testing.T, home string, q purser.SpendQuery) purser.RecoveredSpend {
		t.Helper()
		got, err := newRecoverer(t, home).RecoverSpend(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("recorded file: what it holds beyond the ledger, once", func(t *testing.T) {
		home := t.TempDir()
		file := place(t, home, 0)
		c := call
		c.Session = file
		got := recover(t, home, purser.SpendQuery{Call: c, Workspace: f.Workspace})
		if got.Session != file || tokens(got.Usage) != f.Tokens {
			t.Fatalf("recovered %d tokens from %q, want %d from %q", tokens(got.Usage), got.Session, f.Tokens, file)
		}
		partial := got.Usage[0]
		partial.OutputTokens, partial.ReasoningTokens = 0, 0
		if again := recover(t, home, purser.SpendQuery{Call: c, Workspace: f.Workspace, Recorded: []budget.UsageEvent{partial}}); tokens(again.Usage) != f.Tokens-partial.Tokens() {
			t.Fatalf("with %d tokens in the ledger, recovered %d more; want %d", partial.Tokens(), tokens(again.Usage), f.Tokens-partial.Tokens())
		}
		if again := recover(t, home, purser.SpendQuery{Call: c, Workspace: f.Workspace, Recorded: got.Usage}); len(again.Usage) != 0 {
			t.Fatalf("with the file's usage in the ledger, recovered %+v more", again.Usage)
		}
	})
	locate := []struct {
		name      string
		files     int
		started   time.Time
		workspace string
		claimed   bool
		found     bool
		note      string
	}{
		{"not recorded: located by workspace and start", 1, before, f.Workspace, false, true, "located"},
		{"not recorded: another call's file is not taken", 1, before, f.Workspace, true, false, "no session file"},
		{"not recorded: a file started before the call is not taken", 1, f.Started.Add(time.Second), f.Workspace, false, false, "no session file"},
		{"not recorded: another workspace's file is not taken", 1, before, f.Workspace + "-other", false, false, "no session file"},
		{"not recorded: of two files that fit, none is taken", 2, before, f.Workspace, false, false, "cannot be told"},
	}
	for _, tt := range locate {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			var files []string
			for n := range tt.files {
				files = append(files, place(t, home, n))
			}
			c := call
			c.StartedAt = tt.started
			got := recover(t, home, purser.SpendQuery{Call: c, Workspace: tt.workspace,
				Claimed: func(file string) bool { return tt.claimed && file == files[0] }})
			switch {
			case tt.found && (got.Session != files[0] || tokens(got.Usage) != f.Tokens):
				t.Fatalf("recovered %d tokens from %q, want %d from %q (note %q)", tokens(got.Usage), got.Session, f.Tokens, files[0], got.Note)
			case !tt.found && (got.Session != "" || len(got.Usage) != 0):
				t.Fatalf("took %q (%d tokens), want none (note %q)", got.Session, tokens(got.Usage), got.Note)
			case !strings.Contains(got.Note, tt.note):
				t.Fatalf("note %q lacks %q", got.Note, tt.note)
			}
		})
	}
}
