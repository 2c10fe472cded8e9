package exec_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	pexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

func agent(t *testing.T, script string) (*pexec.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := pexec.New(purser.BackendSpec{Type: "exec", Dir: dir, Options: map[string]any{"command": []any{"sh", filepath.Join(dir, "agent.sh")}}})
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	return b, ws
}

type collector struct {
	mu  sync.Mutex
	evs []budget.UsageEvent
}

func (c *collector) report(ev budget.UsageEvent) {
	c.mu.Lock()
	c.evs = append(c.evs, ev)
	c.mu.Unlock()
}

var prices = pricing.Builtin()

// totals adds up the reported usage priced as the engine records it: the
// backend reports tokens and reported costs, and never estimates.
func (c *collector) totals() budget.Totals {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t budget.Totals
	for _, ev := range c.evs {
		if ev.CostSource == budget.CostEstimated {
			panic("the exec backend estimated a cost itself; pricing is the engine's")
		}
		t.Add(prices.Estimate(ev))
	}
	return t
}

func TestProtocol(t *testing.T) {
	b, ws := agent(t, `
read -r first
[ "$first" = "line one of the prompt" ] || { echo "bad stdin: $first" >&2; exit 1; }
grep -q "line two" "$PURSER_PROMPT_FILE" || exit 1
[ "$PURSER_MODEL" = "claude-sonnet-4-5" ] && [ "$PURSER_CALL_KIND" = main ] && [ "$PURSER_MAX_OUTPUT_TOKENS" = 500 ] || exit 1
echo '{"inputTokens": 1000, "outputTokens": 100}' >> "$PURSER_USAGE_FILE"
sleep 0.1
printf '{"inputTokens": 500, "costUsd": 0.01}' >> "$PURSER_USAGE_FILE"
echo changed > out.txt
`)
	var c collector
	res, err := b.Call(context.Background(), purser.CallRequest{Kind: purser.CallMain, Model: "claude-sonnet-4-5", MaxOutputTokens: 500,
		Prompt: "line one of the prompt\nline two\n", Workspace: ws}, c.report)
	if err != nil {
		t.Fatal(err, res.Note)
	}
	tot := c.totals()
	// 1000 in + 100 out at $3/$15 = $0.0045 estimated; 500 in, $0.01 reported (its last line had no newline).
	if tot.Tokens != 1600 || tot.USD != budget.Dollars(1)/1000*145/10 || tot.USDSource() != budget.SourceEstimated {
		t.Fatalf("totals %+v (note %q)", tot, res.Note)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "changed\n" {
		t.Fatal("the command did not run in the workspace")
	}
}

func TestNoReportMeansUnknownNotZero(t *testing.T) {
	b, ws := agent(t, "echo working\n")
	var c collector
	res, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws}, c.report)
	if err != nil {
		t.Fatal(err)
	}
	if tot := c.totals(); tot.USDSource() != budget.SourceUnknown || tot.Tokens != 0 {
		t.Fatalf("totals %+v", tot)
	}
	if !strings.Contains(res.Note, "dollars are unknown") {
		t.Fatalf("note %q", res.Note)
	}
}

func TestExitCodes(t *testing.T) {
	b, ws := agent(t, "echo busy >&2; exit 75\n")
	_, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws}, func(budget.UsageEvent) {})
	if !errors.Is(err, purser.ErrTransient) {
		t.Fatalf("exit 75: %v", err)
	}
	b, ws = agent(t, "echo broken >&2; exit 3\n")
	_, err = b.Call(context.Background(), purser.CallRequest{Workspace: ws}, func(budget.UsageEvent) {})
	if err == nil || errors.Is(err, purser.ErrTransient) || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("exit 3: %v", err)
	}
}

// A bad usage line is noted on the call, by its number in the file (blank
// lines count), and skipped; the good lines still count.
func TestBadUsageLinesAreNotedNotFatal(t *testing.T) {
	tests := []struct {
		name, script, note string
	}{
		{"not an event", `echo 'not json' >> "$u"; echo '{"tokens": 5}' >> "$u"; echo '{"inputTokens": 7}' >> "$u"`, "PURSER_USAGE_FILE line 1"},
		{"too long to be an event, after a blank line", `echo >> "$u"; head -c 2000000 /dev/zero | tr '\0' x >> "$u"; echo >> "$u"; echo '{"inputTokens": 7}' >> "$u"; echo '{"bad": 1}' >> "$u"`,
			"PURSER_USAGE_FILE line 2: longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ws := agent(t, `u="$PURSER_USAGE_FILE"; `+tt.script)
			var c collector
			res, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws, Model: "m"}, c.report)
			if err != nil {
				t.Fatal(err)
			}
			if c.totals().Tokens != 7 || !strings.Contains(res.Note, tt.note) {
				t.Fatalf("tokens %d, note %q", c.totals().Tokens, res.Note)
			}
		})
	}
}

// A script reporting $0.10, $0.25 and $0.40 with an unreadable middle line
// ends with the readable $0.50, labelled partial, and the note names the
// line: never less money under a reported label.
func TestBadUsageLineMakesTheCallPartial(t *testing.T) {
	b, ws := agent(t, `u="$PURSER_USAGE_FILE"
echo '{"costUsd": 0.10, "inputTokens": 10}' >> "$u"
echo '{"costUsd": 0.25, "inputTokens": }' >> "$u"
echo '{"costUsd": 0.40, "inputTokens": 10}' >> "$u"
`)
	var c collector
	res, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws, Model: "m"}, c.report)
	if err != nil {
		t.Fatal(err)
	}
	tot := c.totals()
	if tot.USD != budget.Dollars(1)/2 || tot.USDSource() != budget.SourcePartial {
		t.Fatalf("totals %s (%s), want $0.50 partial; note %q", tot.USD, tot.USDSource(), res.Note)
	}
	if !strings.Contains(res.Note, "PURSER_USAGE_FILE line 2") || !strings.Contains(res.Note, "partial") {
		t.Fatalf("note %q", res.Note)
	}
}
