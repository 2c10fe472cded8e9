package proc_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/codex"
	"github.com/purser-dev/purser/backend/gemini"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// Hostile and broken output from an agent CLI: every case ends with an
// error or a result, never a panic, and usage already seen stays. (How long
// the 100 MB line takes is the machine's business: under -race on a loaded
// CI machine it took 29 s.)
func TestHostileCLIOutput(t *testing.T) {
	t.Parallel()
	fixture := func(rel string) string {
		p, _ := filepath.Abs(filepath.Join("..", rel))
		return p
	}
	type backendCase struct {
		name  string
		make  func(spec purser.BackendSpec) (purser.Backend, error)
		valid string // a fixture with a complete, successful run
		head  int    // a cut that drops the end of that run
		// headUsage: whether usage streams before the end (Claude's does;
		// Codex and Gemini report it only on their last line).
		headUsage bool
	}
	backends := []backendCase{
		{"claude", func(s purser.BackendSpec) (purser.Backend, error) { return claude.New(s, pricing.Builtin()) },
			fixture("claude/testdata/tool.stream-json-partial.stdout.jsonl"), 8, true},
		{"codex", func(s purser.BackendSpec) (purser.Backend, error) { return codex.New(s, pricing.Builtin()) },
			fixture("codex/testdata/tool.workspace-write.jsonl.stdout.jsonl"), 5, false},
		{"gemini", func(s purser.BackendSpec) (purser.Backend, error) { return gemini.New(s, pricing.Builtin()) },
			fixture("gemini/testdata/tool.yolo-shell.stream-json.stdout.jsonl"), 5, false},
	}
	cases := []struct {
		name      string
		script    string // %s is the valid fixture
		wantErr   bool
		wantUsage bool
	}{
		{"malformed JSON", `echo '{"type":"result", broken'; exit 0`, true, false},
		{"binary garbage", `head -c 4096 /dev/urandom; exit 0`, true, false},
		{"prints nothing", `exit 0`, true, false},
		{"exits non-zero", `echo "fatal: something broke" >&2; exit 2`, true, false},
		{"truncated stream", `head -n HEAD '%s'; exit 1`, true, true},
		{"a 100 MB line, then a good run", `head -c 100000000 /dev/zero | tr '\0' x; echo; cat '%s'`, false, true},
	}
	for _, b := range backends {
		for _, c := range cases {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				script := strings.ReplaceAll(c.script, "HEAD", strconv.Itoa(b.head))
				wantUsage := c.wantUsage
				if c.name == "truncated stream" {
					wantUsage = b.headUsage
				}
				if strings.Contains(script, "%s") {
					script = strings.ReplaceAll(script, "%s", b.valid)
				}
				cli := filepath.Join(dir, "fake-cli")
				if err := os.WriteFile(cli, []byte("#!/bin/sh\ncat > /dev/null\n"+script+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				be, err := b.make(purser.BackendSpec{Type: b.name, Options: map[string]any{"command": cli}})
				if err != nil {
					t.Fatal(err)
				}
				var used budget.Totals
				_, err = be.Call(context.Background(), purser.CallRequest{Model: "m", Prompt: "p", Workspace: dir}, func(ev budget.UsageEvent) {
					if verr := ev.Validate(); verr != nil {
						t.Errorf("invalid usage event %+v: %v", ev, verr)
					}
					used.Add(ev)
				})
				if (err != nil) != c.wantErr {
					t.Fatalf("err = %v, want error %v", err, c.wantErr)
				}
				if (used.Tokens > 0) != wantUsage {
					t.Fatalf("usage %d tokens, want some: %v", used.Tokens, wantUsage)
				}
			})
		}
		t.Run(b.name+"/hangs until the call is cancelled", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cli := filepath.Join(dir, "fake-cli")
			os.WriteFile(cli, []byte("#!/bin/sh\ntrap '' INT TERM\nwhile true; do sleep 0.1; done\n"), 0o755)
			be, _ := b.make(purser.BackendSpec{Type: b.name, Options: map[string]any{"command": cli}})
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := be.Call(ctx, purser.CallRequest{Model: "m", Prompt: "p", Workspace: dir}, func(budget.UsageEvent) {})
			// It would loop for ever: a bound of any size tells killed from
			// waited for, so it is generous.
			took := time.Since(start)
			if err == nil || took > 30*time.Second {
				t.Fatalf("err %v after %s: a hung CLI must be killed at its deadline plus the grace", err, took)
			}
			t.Logf("a hung CLI with a 300 ms deadline returned after %s", took.Round(time.Millisecond))
		})
	}
}
