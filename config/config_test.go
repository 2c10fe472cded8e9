package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/pricing"
)

func TestParseBudgetErrorsNameFileLineAndField(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown key", "optimal: {usd: 1}\nhard:\n  maxIterations: 3\n  usdd: 3\n", "b.yaml:4:3: unknown field \"usdd\""},
		{"unknown tier", "hard: {maxIterations: 3}\ncritical: {usd: 1}\n", "b.yaml:2:1: unknown field \"critical\""},
		{"maxIterations under warning", "warning: {maxIterations: 3}\nhard: {maxIterations: 3}\n", "unknown field \"maxIterations\""},
		{"fractional tokens", "optimal: {tokens: 1.5}\nhard: {maxIterations: 3}\n", "b.yaml:1:19: optimal.tokens: want a whole number, got 1.5"},
		{"fractional iterations", "hard: {maxIterations: 2.5}\n", "b.yaml:1:23: hard.maxIterations: want a whole number, got 2.5"},
		{"string dollars", "hard: {usd: \"3\", maxIterations: 3}\n", "b.yaml:1:13: hard.usd: want a number, got the string \"3\""},
		{"nan", "hard: {usd: .nan, maxIterations: 3}\n", "hard.usd: want a finite number"},
		{"inf minutes", "hard: {timeMinutes: .inf, maxIterations: 3}\n", "hard.timeMinutes: want a finite number"},
		{"null", "hard: {usd: null, maxIterations: 3}\n", "hard.usd: want a number, got null"},
		{"zero", "optimal: {usd: 0}\nhard: {maxIterations: 3}\n", "b.yaml:1:16: optimal.usd: must be greater than 0"},
		{"order", "optimal: {usd: 2}\nwarning: {usd: 1}\nhard: {maxIterations: 3}\n", "b.yaml:2:16: warning.usd: must be at least optimal.usd ($2.00)"},
		{"missing maxIterations", "optimal: {usd: 1}\nhard:\n  usd: 3\n", "b.yaml:3:6: hard.maxIterations: is required"},
		{"no hard at all", "optimal: {usd: 1}\n", "hard.maxIterations: is required"},
		{"empty", "  \n", "b.yaml: file is empty"},
		{"binary", "hard: \x00", "binary"},
		{"syntax", "hard: {usd: [\n", "b.yaml:"},
		{"sequence", "hard: [1, 2]\n", "b.yaml:1:7:"},
		{"json with error", `{"hard": {"maxIterations": 0}}`, "hard.maxIterations: must be an integer of at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.ParseBudget("b.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("accepted %q", tt.in)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *config.Error", err)
			}
		})
	}
}

func TestParseBudgetYAMLAndJSON(t *testing.T) {
	yamlCfg, err := config.ParseBudget("b.yaml", []byte("optimal: {usd: 1.2}\nwarning: {usd: 2.0, tokens: 1000000}\nhard: {usd: 3.0, timeMinutes: 0.5, maxIterations: 8}\n"))
	if err != nil {
		t.Fatal(err)
	}
	jsonCfg, err := config.ParseBudget("b.json", []byte(`{"optimal": {"usd": 1.2}, "warning": {"usd": 2.0, "tokens": 1000000}, "hard": {"usd": 3.0, "timeMinutes": 0.5, "maxIterations": 8}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []budget.Config{yamlCfg, jsonCfg} {
		if *c.Optimal.USD != 1_200_000_000 || *c.Warning.Tokens != 1_000_000 || c.Hard.TimeMinutes.Duration().Seconds() != 30 || *c.Hard.MaxIterations != 8 {
			t.Fatalf("parsed %+v", c)
		}
		if c.Optimal.Tokens != nil || c.Hard.Tokens != nil {
			t.Fatal("a metric nobody configured must stay nil (not enforced), not zero")
		}
	}
}

func TestParseEvents(t *testing.T) {
	in := strings.Join([]string{
		`{"costUsd": 0.10, "inputTokens": 10}`,
		``,
		`{"model": "claude-sonnet-4-5", "inputTokens": 5900, "cacheReadTokens": 4500, "cacheWriteTokens": 100, "outputTokens": 5, "elapsedMs": 250, "iterationEnd": true}`,
		`{"model": "no-such-model", "inputTokens": 3}`,
		`{"elapsedMs": 1000}`,
	}, "\n")
	evs, err := config.ParseEvents("e.jsonl", strings.NewReader(in), pricing.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	wantSources := []budget.CostSource{budget.CostReported, budget.CostEstimated, budget.CostUnknown, budget.CostNone}
	if len(evs) != len(wantSources) {
		t.Fatalf("%d events, want %d", len(evs), len(wantSources))
	}
	for i, ev := range evs {
		if ev.CostSource != wantSources[i] {
			t.Errorf("event %d: source %s, want %s", i, ev.CostSource, wantSources[i])
		}
	}
	if evs[0].USD != 100_000_000 || evs[1].USD != 5_700_000 || !evs[1].IterationEnd || evs[1].Elapsed.Milliseconds() != 250 {
		t.Fatalf("events = %+v", evs)
	}
}

func TestParseEventsErrorsNameLineAndField(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"unknown field", "{}\n{\"inputTokenz\": 1}", "e.jsonl:2: unknown field \"inputTokenz\""},
		{"fraction", `{"outputTokens": 1.5}`, "e.jsonl:1: outputTokens: want a whole number"},
		{"string tokens", `{"inputTokens": "10"}`, "e.jsonl:1: inputTokens: want a whole number, got string"},
		{"string cost", `{"costUsd": "0.1"}`, "e.jsonl:1: costUsd: want a number of dollars"},
		{"negative", `{"inputTokens": -1}`, "e.jsonl:1: inputTokens: must not be negative"},
		{"negative cost", `{"costUsd": -0.5}`, "e.jsonl:1: costUsd: must not be negative"},
		{"cache above input", `{"inputTokens": 1, "cacheReadTokens": 2}`, "must not exceed inputTokens"},
		{"not an object", `[1]`, "e.jsonl:1: want a JSON object"},
		{"broken json", `{"inputTokens": `, "e.jsonl:1: "},
		{"two values", `{} {}`, "e.jsonl:1: more than one JSON value"},
		{"huge line", `{"model": "` + strings.Repeat("x", backend.MaxEventLine) + `"}`, "e.jsonl:1: line longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.ParseEvents("e.jsonl", strings.NewReader(tt.in), pricing.Builtin())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func FuzzParseBudget(f *testing.F) {
	for _, s := range []string{
		"optimal: {usd: 1.2}\nwarning: {usd: 2.0}\nhard: {usd: 3.0, maxIterations: 8}\n",
		`{"hard": {"tokens": 1000, "timeMinutes": 1.5, "maxIterations": 2}}`,
		"hard: {maxIterations: 2.5}", "hard: [", "&a [*a]", "hard: !!binary aGk=",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.ParseBudget("fuzz.yaml", data)
		if err != nil {
			return
		}
		// Whatever parses must be a budget a Manager accepts.
		if _, err := budget.NewManager(cfg, budget.Options{}); err != nil {
			t.Fatalf("parsed config refused by NewManager: %v", err)
		}
	})
}

func FuzzParseEvents(f *testing.F) {
	f.Add([]byte(`{"costUsd": 0.10, "inputTokens": 10, "cacheReadTokens": 5, "model": "gpt-5", "elapsedMs": 1.5, "iterationEnd": true}`))
	f.Add([]byte("{}\n\n{\"outputTokens\": 9223372036854775807}"))
	f.Add([]byte(`{"elapsedMs": 1e300}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := config.ParseEvents("fuzz.jsonl", strings.NewReader(string(data)), pricing.Builtin())
		if err != nil {
			return
		}
		for _, ev := range evs {
			if err := ev.Validate(); err != nil {
				t.Fatalf("parsed an invalid event: %v", err)
			}
		}
	})
}
