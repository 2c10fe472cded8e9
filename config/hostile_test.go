package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/pricing"
)

// Issue 15 #12: every valid JSON number is read as what it is: a whole
// number of tokens may be written 1e3 or 1000.0, dollars 5e-05.
func TestEventsAcceptEveryJSONNumberForm(t *testing.T) {
	in := strings.Join([]string{
		`{"inputTokens": 1e3, "outputTokens": 2.5e2, "cacheReadTokens": 1000.0, "costUsd": 5e-05}`,
		`{"inputTokens": 1E+3, "cacheWriteTokens": 10e0, "costUsd": 5E-5, "elapsedMs": 1.5e3}`,
		`{"inputTokens": 9.223372036854775807e18}`,
	}, "\n")
	evs, err := config.ParseEvents("e.jsonl", strings.NewReader(in), pricing.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	if e := evs[0]; e.InputTokens != 1000 || e.OutputTokens != 250 || e.CacheReadTokens != 1000 || e.USD != 50_000 {
		t.Errorf("event 1 = %+v", e)
	}
	if e := evs[1]; e.InputTokens != 1000 || e.CacheWriteTokens != 10 || e.USD != 50_000 || e.Elapsed.Milliseconds() != 1500 {
		t.Errorf("event 2 = %+v", e)
	}
	if e := evs[2]; e.InputTokens != 9223372036854775807 {
		t.Errorf("event 3 = %+v", e)
	}
	for line, want := range map[string]string{
		`{"inputTokens": 1.5e0}`:        "inputTokens: want a whole number, got 1.5e0",
		`{"inputTokens": 1e19}`:         `inputTokens: "1e19" is out of range`,
		`{"inputTokens": 1e1000000}`:    `inputTokens: "1e1000000" is out of range`,
		`{"outputTokens": "1e3"}`:       "outputTokens: want a whole number, got string",
		`{"cacheReadTokens": true}`:     "cacheReadTokens: want a whole number, got true",
		`{"costUsd": 1e-1000000}`:       "costUsd: ",
		`{"inputTokens": -1e2}`:         "inputTokens: must not be negative",
		`{"cacheWriteTokens": [1]}`:     "cacheWriteTokens: want a whole number",
		`{"inputTokens": 1, "x": 1e3}`:  `unknown field "x"`,
		`{"inputTokens": 1.0000000001}`: "want a whole number",
	} {
		if _, err := config.ParseEvents("e.jsonl", strings.NewReader(line), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", line, err, want)
		}
	}
}

// A budget's numbers may be written in any valid JSON (and YAML 1.2) form.
func TestBudgetAcceptsExponentNumbers(t *testing.T) {
	for _, in := range []string{
		"optimal: {usd: 5e-05, tokens: 1e5}\nhard: {usd: 1, tokens: 2e5, timeMinutes: 1.5e1, maxIterations: 3e0}\n",
		`{"optimal": {"usd": 5e-05, "tokens": 1e5}, "hard": {"usd": 1, "tokens": 2.0e5, "timeMinutes": 1.5e1, "maxIterations": 3}}`,
	} {
		cfg, err := config.ParseBudget("b", []byte(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if *cfg.Optimal.USD != 50_000 || *cfg.Optimal.Tokens != 100_000 || *cfg.Hard.Tokens != 200_000 || *cfg.Hard.MaxIterations != 3 {
			t.Errorf("%s: %+v", in, cfg)
		}
	}
	for in, want := range map[string]string{
		"hard: {tokens: 1.5e0, maxIterations: 3}\n":     "hard.tokens: want a whole number, got 1.5e0",
		"hard: {usd: '5e-05', maxIterations: 3}\n":      `hard.usd: want a number, got the string "5e-05"`,
		"hard: {usd: 5e-05x, maxIterations: 3}\n":       `hard.usd: want a number, got the string "5e-05x"`,
		"hard: {tokens: 1e19, maxIterations: 3}\n":      "b:1:16: hard.tokens: 1e19 is out of range",
		"hard: {usd: 1e400, maxIterations: 3}\n":        "b:1:13: hard.usd: 1e400 is out of range",
		"hard: {timeMinutes: 1e30, maxIterations: 3}\n": "b:1:21: hard.timeMinutes: 1e30 is out of range",
		"hard: {maxIterations: 1e1000000}\n":            "b:1:23: hard.maxIterations: \"1e1000000\" is out of range",
	} {
		if _, err := config.ParseBudget("b", []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", in, err, want)
		}
	}
}

// A UTF-8 byte order mark at the start of a file (as some Windows editors
// write) is not an invisible part of the first key.
func TestByteOrderMarkIsAccepted(t *testing.T) {
	const bom = "\ufeff"
	if _, err := config.ParseBudget("b.yaml", []byte(bom+"hard: {usd: 1, maxIterations: 3}\n")); err != nil {
		t.Errorf("YAML with a BOM: %v", err)
	}
	if _, err := config.ParseBudget("b.json", []byte(bom+`{"hard": {"usd": 1, "maxIterations": 3}}`)); err != nil {
		t.Errorf("JSON with a BOM: %v", err)
	}
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(bom+"steps:\n  - usage: {inputTokens: 5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Steps []struct {
			Usage backend.Usage `yaml:"usage"`
		} `yaml:"steps"`
	}
	if err := config.DecodeFile(p, &s); err != nil || len(s.Steps) != 1 || s.Steps[0].Usage.InputTokens != 5 {
		t.Errorf("DecodeFile with a BOM: %+v, %v", s, err)
	}
	// Errors still point at the right line and column.
	_, err := config.ParseBudget("b.yaml", []byte(bom+"hard: {usd: 1, maxIterations: 3}\nbogus: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "b.yaml:2:1") || strings.Contains(err.Error(), bom) {
		t.Errorf("error after a BOM: %v", err)
	}
	if _, err := config.ParseEvents("e.jsonl", strings.NewReader(bom+`{"inputTokens": 5}`), nil); err != nil {
		t.Errorf("events with a BOM: %v", err)
	}
}

// A small document nested deeply is refused before the YAML parser sees it,
// by a depth bound, with a message that says so.
func TestDeeplyNestedDocumentIsRefusedByItsDepth(t *testing.T) {
	for name, doc := range map[string]string{
		"flow":  strings.Repeat("[", 32<<10) + strings.Repeat("]", 32<<10),
		"block": blockNested(360),
		"json":  strings.Repeat(`{"a":`, 12<<10) + "1" + strings.Repeat("}", 12<<10),
	} {
		_, err := config.ParseBudget("deep.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "deep.yaml") || !strings.Contains(err.Error(), "nested") {
			t.Errorf("%s: err = %v, want it refused for its nesting", name, err)
		}
	}
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, []byte("steps:\n  - usage: {}\n"+strings.Repeat("# padding\n", 2<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := config.DecodeFile(p, &v); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a 20 MB file: err = %v, want it refused for its size", err)
	}
}

// blockNested is a block mapping nested depth levels, one column each.
func blockNested(depth int) string {
	var b strings.Builder
	for i := range depth {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return b.String() + strings.Repeat(" ", depth) + "b: 1\n"
}
