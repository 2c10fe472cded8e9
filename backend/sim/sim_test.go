package sim_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/pricing"
)

func newSim(t *testing.T, script string) (*sim.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := sim.New(purser.BackendSpec{Type: "sim", Dir: dir, Options: map[string]any{"script": "sim.yaml", "transcript": "calls.jsonl"}})
	if err != nil {
		t.Fatal(err)
	}
	return b, dir
}

// Usage streams out in parts over the delay and adds up exactly.
func TestUsageStreamsEvenlyAndExactly(t *testing.T) {
	b, dir := newSim(t, "steps:\n  - usage: {inputTokens: 1001, outputTokens: 333, cacheReadTokens: 7, costUsd: 0.10}\n    delayMs: 100\n")
	var mu sync.Mutex
	var parts []budget.UsageEvent
	start := time.Now()
	_, err := b.Call(context.Background(), purser.CallRequest{Kind: purser.CallMain, Model: "m", Workspace: dir}, func(ev budget.UsageEvent) {
		mu.Lock()
		parts = append(parts, ev)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 100*time.Millisecond || len(parts) < 5 {
		t.Fatalf("%d parts in %s: usage did not stream over the delay", len(parts), time.Since(start))
	}
	var sum budget.Totals
	for _, p := range parts {
		if p.CostSource != budget.CostReported || p.Model != "m" {
			t.Fatalf("part %+v", p)
		}
		sum.Add(p)
	}
	if sum.Tokens != 1334 || sum.USD != budget.Dollars(1)/10 {
		t.Fatalf("parts add up to %d tokens and %s", sum.Tokens, sum.USD)
	}
}

func TestCancelStopsTheStream(t *testing.T) {
	b, dir := newSim(t, "steps:\n  - usage: {inputTokens: 1000}\n    delayMs: 1000\n")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	var got int64
	_, err := b.Call(ctx, purser.CallRequest{Workspace: dir}, func(ev budget.UsageEvent) { got += ev.Tokens() })
	if err == nil || got >= 1000 || got == 0 {
		t.Fatalf("err %v after %d tokens: want cancelled part-way", err, got)
	}
	tr, _ := os.ReadFile(filepath.Join(dir, "calls.jsonl"))
	if !strings.Contains(string(tr), `"cancelled":true`) {
		t.Fatalf("transcript %s", tr)
	}
}

func TestScriptErrorsNameFileLineAndField(t *testing.T) {
	for _, tt := range []struct{ script, want string }{
		{"steps:\n  - usage: {inputTokenz: 1}\n", `sim.yaml:2:13: unknown field "inputTokenz"`},
		{"steps:\n  - usage: {inputTokens: 1}\n    fail: sometimes\n", `sim.yaml:3:11: steps[0].fail: "sometimes": want transient or fatal`},
		{"steps:\n  - files: {../escape.txt: x}\n", `steps[0].files: file "../escape.txt": want a path inside the workspace`},
		{"steps: []\n", "steps: at least one step is required"},
		{"steps:\n  - delayMs: -5\n", "steps[0].delayMs: must not be negative"},
		{"steps:\n  - usage: {inputTokens: 1, cacheReadTokens: 5}\n", "steps[0].usage: cacheReadTokens + cacheWriteTokens (5) must not exceed inputTokens"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte(tt.script), 0o644)
		_, err := sim.New(purser.BackendSpec{Type: "sim", Dir: dir, Options: map[string]any{"script": "sim.yaml"}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("script %q: err %v, want %q", tt.script, err, tt.want)
		}
	}
	if _, err := sim.New(purser.BackendSpec{Type: "sim", Options: map[string]any{}}); err == nil {
		t.Error("missing script accepted")
	}
}

func TestFilesStayInsideWorkspace(t *testing.T) {
	outside := t.TempDir()
	b, dir := newSim(t, "steps:\n  - files: {evil/x.txt: pwned}\n")
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	if err := os.Symlink(outside, filepath.Join(ws, "evil")); err != nil {
		t.Fatal(err)
	}
	_, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws}, func(budget.UsageEvent) {})
	if err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x.txt")); err == nil {
		t.Fatal("a file was written outside the workspace through a symlink")
	}
}

func FuzzLoadScript(f *testing.F) {
	f.Add([]byte("steps:\n  - usage: {inputTokens: 5, costUsd: 0.1}\n    files: {a.txt: x}\n    delayMs: 1\n    fail: transient\n"))
	f.Add([]byte("steps: [{usage: {cacheReadTokens: -1}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "sim.yaml")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := sim.Load(p)
		if err != nil {
			return
		}
		for _, st := range s.Steps {
			if _, err := st.Usage.Event(nil); err != nil {
				t.Fatalf("a loaded script has an invalid step: %v", err)
			}
		}
	})
}

// A write through a symlinked directory creates nothing outside the
// workspace, not even the directories on the way.
func TestNoDirectoriesCreatedOutsideWorkspace(t *testing.T) {
	outside := t.TempDir()
	b, dir := newSim(t, "steps:\n  - files: {evil/sub/x.txt: pwned}\n")
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	if err := os.Symlink(outside, filepath.Join(ws, "evil")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws}, func(budget.UsageEvent) {}); err == nil {
		t.Fatal("a write through a symlink out of the workspace was accepted")
	}
	if _, err := os.Stat(filepath.Join(outside, "sub")); err == nil {
		t.Fatal("a directory was created outside the workspace")
	}
}

// New decodes options given in code as strictly as the loader decodes a
// file, and its errors name the option, not the backend: the engine names
// the backend once.
func TestNewRefusesBadOptionsByName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte("steps:\n  - usage: {inputTokens: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		options any
		want    string
	}{
		{"typo", map[string]any{"script": "sim.yaml", "transcipt": "calls.jsonl"}, "transcipt: unknown option (known: script, transcript)"},
		{"wrong type", map[string]any{"script": uint64(5)}, "script: want a string, got 5"},
		{"missing script", map[string]any{}, "script: is required"},
		{"no options at all", nil, "script: is required"},
		{"script file missing", map[string]any{"script": "nope.yaml"}, "script: cannot read the script: stat " + filepath.Join(dir, "nope.yaml")},
		{"transcript's directory missing", map[string]any{"script": "sim.yaml", "transcript": "no/such/dir/calls.jsonl"}, "transcript: its directory " + filepath.Join(dir, "no/such/dir") + " does not exist"},
		{"options of another backend", &struct{ Script string }{"sim.yaml"}, "options of type *struct { Script string } given to a backend whose options are *sim.Options"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sim.New(purser.BackendSpec{Type: "sim", Dir: dir, Options: tt.options})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to start with %q", err, tt.want)
			}
		})
	}
	// The options the loader decoded are taken as they are.
	if _, err := sim.New(purser.BackendSpec{Type: "sim", Dir: dir, Options: &sim.Options{Script: "sim.yaml"}}); err != nil {
		t.Fatalf("typed options: %v", err)
	}
}

// The script is loaded and validated when the task file is loaded, before
// anything is spent; each problem names the task file, line and option.
func TestLoadTaskChecksTheScript(t *testing.T) {
	for _, tt := range []struct{ name, backend, want string }{
		{"missing script", "backend:\n  type: sim\n", "task.yaml:7:7: backend.script: is required: a YAML file with steps:"},
		{"script file missing", "backend:\n  type: sim\n  script: nope.yaml\n", "task.yaml:8:11: backend.script: cannot read the script: stat "},
		{"invalid script", "backend:\n  type: sim\n  script: bad.yaml\n", `task.yaml:8:11: backend.script: BAD:3:11: steps[0].fail: "sometimes": want transient or fatal`},
		{"typo", "backend:\n  type: sim\n  script: sim.yaml\n  transcipt: calls.jsonl\n", "task.yaml:9:14: backend.transcipt: unknown option (known: billing, callTimeout, models, sandbox, script, stallTimeout, transcript, type, unpricedModel)"},
		{"transcript's directory missing", "backend:\n  type: sim\n  script: sim.yaml\n  transcript: no/calls.jsonl\n", "task.yaml:9:15: backend.transcript: its directory "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range map[string]string{
				"sim.yaml":  "steps:\n  - usage: {inputTokens: 1}\n",
				"bad.yaml":  "steps:\n  - usage: {inputTokens: 1}\n    fail: sometimes\n",
				"task.yaml": "id: t\ngoal: g\nworkspace: .\nvalidators: [{name: v, run: 'true'}]\nbudget: {hard: {maxIterations: 2}}\n" + tt.backend,
			} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "task.yaml")
			_, _, err := config.Loader{Backends: backend.Types{"sim": sim.NewOptions}}.LoadTask(path)
			want := strings.ReplaceAll(strings.ReplaceAll(tt.want, "task.yaml", path), "BAD", filepath.Join(dir, "bad.yaml"))
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("err = %v, want it to start with %q", err, want)
			}
		})
	}
}

// The sim is a spending fence (purser.SpendFence) only when every step that
// uses tokens reports its cost: then each dollar is reported as it streams,
// whatever the model's price; a step without costUsd leaves its dollars to
// Purser's catalogue.
func TestFencesUSDOnlyWhenEveryStepReportsItsCost(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   bool
	}{
		{"steps:\n  - usage: {inputTokens: 10, costUsd: 0.1}\n  - fail: transient\n", true},
		{"steps:\n  - usage: {inputTokens: 10, costUsd: 0.1}\n  - usage: {outputTokens: 5}\n", false},
	} {
		b, _ := newSim(t, tc.script)
		if got := b.FencesUSD("sim-large"); got != tc.want {
			t.Errorf("FencesUSD on\n%s= %v, want %v", tc.script, got, tc.want)
		}
	}
}

// A step split into streamed parts is billed as the one request it stands
// for (issue 22 item 8): a 250k Sonnet 4.5 step with 1-hour cache writes is
// $1.815 at the long-context 1-hour rates, not $0.8625 (each part priced
// alone below 200k, its 1-hour writes as 5-minute ones). Every part keeps
// the step's service tier, and the parts' 1-hour writes add up exactly.
func TestSplitStepIsPricedAsOneRequest(t *testing.T) {
	b, dir := newSim(t, "steps:\n  - usage: {inputTokens: 250000, outputTokens: 6000, cacheWriteTokens: 30000, cacheWrite1hTokens: 30000, serviceTier: priority}\n    delayMs: 100\n"+
		"  - usage: {inputTokens: 250000, outputTokens: 6000, cacheWriteTokens: 30000, cacheWrite1hTokens: 30000}\n    delayMs: 100\n")
	prices := pricing.Builtin()
	for _, tt := range []struct {
		tier string
		want budget.USD
	}{{"priority", 0}, {"", budget.Dollars(1815) / 1000}} {
		var mu sync.Mutex
		var parts []budget.UsageEvent
		_, err := b.Call(context.Background(), purser.CallRequest{Kind: purser.CallMain, Model: "claude-sonnet-4-5", Workspace: dir, Price: prices.Estimate},
			func(ev budget.UsageEvent) {
				mu.Lock()
				defer mu.Unlock()
				// The engine prices every part it is handed the same way.
				parts = append(parts, prices.Estimate(ev))
			})
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) < 5 {
			t.Fatalf("%d parts: the step was not split", len(parts))
		}
		var sum budget.Totals
		var w1h, w int64
		for _, p := range parts {
			if p.ServiceTier != tt.tier {
				t.Fatalf("part %+v: service tier %q, want %q", p, p.ServiceTier, tt.tier)
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("part %+v: %v", p, err)
			}
			sum.Add(p)
			w1h += p.CacheWrite1hTokens
			w += p.CacheWriteTokens
		}
		if w1h != 30000 || w != 30000 || sum.Tokens != 256000 {
			t.Fatalf("tier %q: parts add up to %d tokens, %d cache writes, %d of them 1-hour", tt.tier, sum.Tokens, w, w1h)
		}
		if tt.tier == "priority" {
			// The table has no priority rates for Sonnet 4.5: unknown, never standard.
			for _, p := range parts {
				if p.CostSource != budget.CostUnknown {
					t.Fatalf("priority part %+v: want unknown cost", p)
				}
			}
			continue
		}
		if sum.USD != tt.want {
			t.Fatalf("parts priced at %s in total, want %s (the step priced whole)", sum.USD.Decimal(), tt.want.Decimal())
		}
	}
}
