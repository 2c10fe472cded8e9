package claude_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/internal/fixturetest"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

func feed(t *testing.T, p *claude.Parser, name string) budget.Totals {
	t.Helper()
	return fixturetest.Feed(t, name, p.Feed)
}

// Every token and dollar of the real captured runs lands in the ledger
// exactly once: what streams, plus what reconciliation adds, equals the
// result's reported totals.
func TestParserGoldenFixtures(t *testing.T) {
	tests := []struct {
		fixture        string
		tokens         int64  // input (with cache) + output, as the result reports
		usd            string // total_cost_usd
		streamedTokens int64  // what the stream alone reported
		subtype        string
		retries        int
	}{
		// Two API calls: a tool call (1200+300+4000 in, 60 out) and "done" (1300+100+4500 in, 5 out).
		{"tool.stream-json-partial.stdout.jsonl", 11465, "0.020875", 11465, "success", 0},
		// Without --include-partial-messages the stream only shows output_tokens 1 per message;
		// the result reconciles the other 63.
		{"tool.stream-json.stdout.jsonl", 11465, "0.020875", 11402, "success", 0},
		{"text.stream-json.stdout.jsonl", 5905, "0.0095", 5901, "success", 0},
		// SIGINT after the tool turn: the result still comes, with the cost so far.
		{"sigint.after-tool-turn.stream-json.stdout.jsonl", 5560, "0.011375", 5501, "error_during_execution", 0},
		// Claude's own --max-budget-usd stopped it, after overshooting.
		{"tool.max-budget-usd.stream-json.stdout.jsonl", 5560, "0.011375", 5501, "error_max_budget_usd", 0},
		// 529 twice then success: the retries cost nothing.
		{"err.529x2-then-ok.stream-json.stdout.jsonl", 5905, "0.0095", 5901, "success", 2},
	}
	prices := pricing.Builtin()
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			p := claude.NewParser(prices)
			streamed := feed(t, p, tt.fixture)
			if streamed.Tokens != tt.streamedTokens {
				t.Errorf("streamed %d tokens, want %d", streamed.Tokens, tt.streamedTokens)
			}
			r := p.Result()
			if r == nil || r.Subtype != tt.subtype {
				t.Fatalf("result %+v, want subtype %s", r, tt.subtype)
			}
			if p.Retries() != tt.retries {
				t.Errorf("retries %d, want %d", p.Retries(), tt.retries)
			}
			adj, note := p.Reconcile()
			total := streamed
			for _, ev := range adj {
				if err := ev.Validate(); err != nil {
					t.Fatalf("invalid adjustment %+v: %v", ev, err)
				}
				total.Add(ev)
			}
			want, _ := budget.ParseUSD(tt.usd)
			if total.Tokens != tt.tokens || total.USD != want {
				t.Fatalf("ledger has %d tokens and %s; the result reports %d and %s (note %q)", total.Tokens, total.USD, tt.tokens, want, note)
			}
			// Feeding the result again must not count anything twice.
			again, _ := p.Reconcile()
			var t2 budget.Totals
			for _, ev := range again {
				t2.Add(ev)
			}
			if t2.Tokens != total.Tokens-streamed.Tokens {
				t.Fatalf("reconciling twice changed the adjustment")
			}
		})
	}
}

// SIGTERM loses the result line; the session transcript keeps each message's
// final usage, and what the stream missed is recovered from it, once.
func TestTranscriptRecoversKilledRun(t *testing.T) {
	p := claude.NewParser(pricing.Builtin())
	streamed := feed(t, p, "sigterm.after-tool-turn.stream-json.stdout.jsonl")
	if p.Result() != nil {
		t.Fatal("a SIGTERM run has no result line")
	}
	data, err := os.ReadFile("testdata/sigterm.after-tool-turn.transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	total := streamed
	for _, l := range bytes.Split(data, []byte("\n")) {
		for _, ev := range p.FeedTranscript(l) {
			total.Add(ev)
		}
	}
	// The tool-call message: 1200 + 300 + 4000 in, 60 out = 5560 tokens, $0.011375 at opus-4-8 prices.
	want, _ := budget.ParseUSD("0.011375")
	if total.Tokens != 5560 || total.USD != want || total.USDSource() != budget.SourceEstimated {
		t.Fatalf("recovered %d tokens, %s (%s); want 5560, %s, estimated", total.Tokens, total.USD, total.USDSource(), want)
	}
	// The transcript twice adds nothing.
	for _, l := range bytes.Split(data, []byte("\n")) {
		if evs := p.FeedTranscript(l); len(evs) != 0 {
			t.Fatalf("transcript counted twice: %+v", evs)
		}
	}
}

func TestParserRefusesGarbage(t *testing.T) {
	p := claude.NewParser(nil)
	if _, err := p.Feed([]byte("not json")); err == nil {
		t.Fatal("garbage accepted")
	}
	if evs, err := p.Feed([]byte(`{"type":"something_new","x":1}`)); err != nil || evs != nil {
		t.Fatalf("unknown line type: %v %v", evs, err)
	}
}

func FuzzParser(f *testing.F) {
	for _, name := range []string{"tool.stream-json-partial.stdout.jsonl", "sigterm.after-tool-turn.transcript.jsonl"} {
		data, _ := os.ReadFile(filepath.Join("testdata", name))
		for _, l := range bytes.Split(data, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		p := claude.NewParser(pricing.Builtin())
		for range 2 {
			evs, _ := p.Feed(line)
			evs = append(evs, p.FeedTranscript(line)...)
			adj, _ := p.Reconcile()
			for _, ev := range append(evs, adj...) {
				if ev.Tokens() < 0 || ev.USD < 0 {
					t.Fatalf("negative usage from %q: %+v", line, ev)
				}
			}
		}
	})
}
