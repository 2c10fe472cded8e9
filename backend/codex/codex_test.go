package codex_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/purser-dev/purser/backend/codex"
	"github.com/purser-dev/purser/backend/internal/fixturetest"
	"github.com/purser-dev/purser/budget"
)

func feed(t *testing.T, p *codex.Parser, name string) budget.Totals {
	t.Helper()
	return fixturetest.Feed(t, name, p.Feed)
}

// Every token the real captured runs reported lands once; dollars are
// estimated from the catalogue (Codex reports none).
func TestParserGoldenFixtures(t *testing.T) {
	tests := []struct {
		fixture       string
		tokens        int64
		cached        int64
		usd           string
		done          bool
		failed, retry bool
	}{
		// tool call (5200 in, 4000 cached, 60 out) + "done" (5800, 4500, 5), at gpt-5.5 prices ($5 in, $0.50 cached, $30 out):
		// (1200×5 + 4000×0.5 + 60×30) + (1300×5 + 4500×0.5 + 5×30) per million = $0.0098 + $0.0089
		{"tool.workspace-write.jsonl.stdout.jsonl", 11065, 8500, "0.0187", true, false, false},
		{"text.jsonl.stdout.jsonl", 5805, 4500, "0.0089", true, false, false},
		{"err.500x2-then-ok.jsonl.stdout.jsonl", 5805, 4500, "0.0089", true, false, false},
		{"err.drop-once.jsonl.stdout.jsonl", 5805, 4500, "0.0089", true, false, true},
		{"err.429x2-then-ok.jsonl.stdout.jsonl", 0, 0, "0", false, true, false},
		{"err.500-always.jsonl.stdout.jsonl", 0, 0, "0", false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			p := codex.NewParser("gpt-5.5")
			tot := feed(t, p, tt.fixture)
			want, _ := budget.ParseUSD(tt.usd)
			if tot.Tokens != tt.tokens || tot.USD != want {
				t.Fatalf("ledger %d tokens %s, want %d, %s", tot.Tokens, tot.USD, tt.tokens, want)
			}
			if p.Done != tt.done || (p.Failed != "") != tt.failed || (p.Retries > 0) != tt.retry {
				t.Fatalf("done %v failed %q retries %d", p.Done, p.Failed, p.Retries)
			}
			if tt.tokens > 0 && tot.USDSource() != budget.SourceEstimated {
				t.Fatalf("source %s, want estimated", tot.USDSource())
			}
		})
	}
	// An unpriced model: tokens counted, dollars unknown, never $0.
	p := codex.NewParser("my-local-model")
	if tot := feed(t, p, "text.jsonl.stdout.jsonl"); tot.USDSource() != budget.SourceUnknown || tot.Tokens != 5805 {
		t.Fatalf("unpriced: %+v", tot)
	}
}

// SIGTERM: no turn.completed; the rollout file kept the per-call totals.
func TestRolloutRecoversKilledRun(t *testing.T) {
	p := codex.NewParser("gpt-5.5")
	if tot := feed(t, p, "sigterm.after-tool-turn.jsonl.stdout.jsonl"); tot.Tokens != 0 || p.Done {
		t.Fatalf("a killed run printed usage: %+v", tot)
	}
	data, err := os.ReadFile("testdata/sigterm.after-tool-turn.rollout.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var tot budget.Totals
	for _, ev := range p.Recover(data) {
		tot.Add(ev)
	}
	if tot.Tokens != 5260 {
		t.Fatalf("recovered %d tokens, want 5260 (5200 in + 60 out)", tot.Tokens)
	}
	if again := p.Recover(data); len(again) != 0 {
		t.Fatalf("recovered twice: %+v", again)
	}
}

func FuzzParser(f *testing.F) {
	data, _ := os.ReadFile("testdata/tool.workspace-write.jsonl.stdout.jsonl")
	for _, l := range bytes.Split(data, []byte("\n")) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		p := codex.NewParser("gpt-5.5")
		evs, _ := p.Feed(line)
		evs = append(evs, p.Recover(line)...)
		for _, ev := range evs {
			if err := ev.Validate(); err != nil {
				t.Fatalf("invalid event from %q: %v", line, err)
			}
		}
	})
}

// The rollout's running totals arrive while Codex runs, then turn.completed
// says the turn's total: every token lands once, in whichever order.
func TestRolloutThenTurnCompletedCountsOnce(t *testing.T) {
	rollout, err := os.ReadFile("testdata/sigterm.after-tool-turn.rollout.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range []string{"rollout first", "stdout first"} {
		p := codex.NewParser("gpt-5.5")
		var tot budget.Totals
		add := func(evs []budget.UsageEvent) {
			for _, ev := range evs {
				tot.Add(ev)
			}
		}
		if order == "rollout first" {
			add(p.Recover(rollout)) // the first model call: 5,260 tokens
			if tot.Tokens != 5260 {
				t.Fatalf("%s: %d tokens after the rollout", order, tot.Tokens)
			}
			tot = budget.Totals{}
			add(p.Recover(rollout))
			if tot.Tokens != 0 {
				t.Fatalf("%s: the rollout was counted twice", order)
			}
		}
		tot = feed(t, p, "tool.workspace-write.jsonl.stdout.jsonl")
		if order == "stdout first" {
			add(p.Recover(rollout)) // an older total adds nothing
		}
		var want int64 = 11065
		if order == "rollout first" {
			want = 11065 - 5260
		}
		if tot.Tokens != want {
			t.Fatalf("%s: turn.completed added %d tokens, want %d", order, tot.Tokens, want)
		}
	}
}

// With no model configured, the rollout's turn context names the model the
// tokens are priced at: none of them is left unknown.
func TestModelFromTheRolloutWhenNoneConfigured(t *testing.T) {
	data, err := os.ReadFile("testdata/sigterm.after-tool-turn.rollout.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	evs := codex.NewParser("").Recover(data)
	if len(evs) == 0 {
		t.Fatal("nothing recovered")
	}
	for _, ev := range evs {
		if ev.Model != "gpt-5.5" {
			t.Fatalf("event model %q, want the rollout's gpt-5.5", ev.Model)
		}
	}
	// A configured model is kept.
	if evs := codex.NewParser("gpt-5.4").Recover(data); len(evs) == 0 || evs[0].Model != "gpt-5.4" {
		t.Fatalf("configured model overridden: %+v", evs)
	}
}
