package exec_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	b, err := pexec.New(purser.BackendSpec{Type: "exec", Dir: dir, Options: map[string]any{"command": []any{"sh", filepath.Join(dir, "agent.sh")}}}, pricing.Builtin())
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

func (c *collector) totals() budget.Totals {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t budget.Totals
	for _, ev := range c.evs {
		t.Add(ev)
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

func TestBadUsageLinesAreNotedNotFatal(t *testing.T) {
	b, ws := agent(t, `echo 'not json' >> "$PURSER_USAGE_FILE"; echo '{"tokens": 5}' >> "$PURSER_USAGE_FILE"; echo '{"inputTokens": 7}' >> "$PURSER_USAGE_FILE"`)
	var c collector
	res, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws, Model: "m"}, c.report)
	if err != nil {
		t.Fatal(err)
	}
	if c.totals().Tokens != 7 || !strings.Contains(res.Note, "PURSER_USAGE_FILE line 1") {
		t.Fatalf("tokens %d, note %q", c.totals().Tokens, res.Note)
	}
}

// Usage streams while the command runs, so a stop mid-call keeps what was
// reported and ends the command at once: it would report for a minute.
func TestStopMidCall(t *testing.T) {
	b, ws := agent(t, `for i in $(seq 600); do echo '{"outputTokens": 100}' >> "$PURSER_USAGE_FILE"; sleep 0.1; done`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c collector
	start := time.Now()
	_, err := b.Call(ctx, purser.CallRequest{Workspace: ws}, func(ev budget.UsageEvent) {
		c.report(ev)
		if c.totals().Tokens >= 300 {
			cancel()
		}
	})
	took := time.Since(start)
	if err == nil || took > 30*time.Second {
		t.Fatalf("err %v after %s: want the one-minute command stopped", err, took)
	}
	t.Logf("start, three usage lines, stop: %s", took.Round(time.Millisecond))
	if tok := c.totals().Tokens; tok < 300 || tok >= 60000 {
		t.Fatalf("%d tokens recorded: want what streamed before the stop", tok)
	}
}
