package claude_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// feedAs feeds a fixture with every claude-opus-4-8 renamed to model.
func feedAs(t *testing.T, p *claude.Parser, name, model string) []budget.UsageEvent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("claude-opus-4-8"), []byte(model))
	var out []budget.UsageEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		evs, err := p.Feed(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
	}
	return out
}

// Issue 22 item 12: Claude Code prices a model it has no price for at its
// default model's (Opus) rates, and its total_cost_usd is then a guess: the
// call must not end "reported" on it. With no price of Purser's, the
// guessed dollars count (the budget acts on them) but are labelled
// estimated, and the streamed usage stays unknown; with Purser's own price,
// Purser's estimate stands and the guess is not added on top. The note says
// why either way. A model Claude Code prices is still reported.
func TestClaudeCodesGuessForAnUnknownModelIsNotReported(t *testing.T) {
	const fixture = "tool.stream-json-partial.stdout.jsonl"
	reported, _ := budget.ParseUSD("0.020875")
	opus, ok := pricing.Builtin().Lookup("claude-opus-4-8")
	if !ok {
		t.Fatal("claude-opus-4-8 has no built-in price")
	}
	third := pricing.New()
	p := opus.Price
	third.Set(pricing.Entry{Model: "claude-nova-9", Price: pricing.Price{Input: p.Input / 3, Output: p.Output / 3, CacheRead: p.CacheRead / 3, CacheWrite: p.CacheWrite / 3}})
	for _, tt := range []struct {
		name, model string
		prices      *pricing.Catalogue
		want        func(streamed budget.USD) budget.USD
		source      budget.USDSource
		noteHas     []string
	}{
		{"no price anywhere: the guess counts, estimated", "claude-nova-9", pricing.New(),
			func(budget.USD) budget.USD { return reported }, budget.SourcePartial,
			[]string{"Claude Code has no price for claude-nova-9", "guess", "estimated"}},
		{"Purser's price stands", "claude-nova-9", third,
			func(s budget.USD) budget.USD { return s }, budget.SourceEstimated,
			[]string{"Claude Code has no price for claude-nova-9", "guess", "Purser's estimate"}},
		{"a model Claude Code prices is reported", "claude-opus-4-8", pricing.New(),
			func(budget.USD) budget.USD { return reported }, budget.SourceReported,
			[]string{"no known price"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parser := claude.NewParser()
			var streamed budget.Totals
			for _, ev := range feedAs(t, parser, fixture, tt.model) {
				streamed.Add(tt.prices.Estimate(ev))
			}
			adj, note := parser.Reconcile(tt.prices.Estimate)
			total := streamed
			for _, ev := range adj {
				if err := ev.Validate(); err != nil {
					t.Fatalf("adjustment %+v: %v", ev, err)
				}
				total.Add(tt.prices.Estimate(ev))
			}
			if want := tt.want(streamed.USD); total.USD != want || total.USDSource() != tt.source {
				t.Fatalf("ledger %s (%s), want %s (%s); note %q", total.USD, total.USDSource(), want, tt.source, note)
			}
			if total.Tokens != 11465 {
				t.Fatalf("%d tokens", total.Tokens)
			}
			for _, s := range tt.noteHas {
				if !strings.Contains(note, s) {
					t.Fatalf("note %q lacks %q", note, s)
				}
			}
		})
	}
}

// The names Claude Code prices, as its own table shortens them.
func TestClaudeCodePricesAsItsTableDoes(t *testing.T) {
	for name, want := range map[string]bool{
		"claude-opus-4-8": true, "claude-opus-4-8[1m]": true, "us.anthropic.claude-sonnet-4-5-20250929-v1:0": true,
		"claude-opus-4": true, "claude-opus-4-20250514": true, "claude-sonnet-4@20250514": true, "claude-opus-4-latest": true,
		"claude-haiku-4-5": true, "claude-3-5-haiku-20241022": true, "claude-fable-5": true,
		"claude-opus-4-9": false, "claude-sonnet-4-9": false, "claude-3-opus-20240229": false, "claude-3-haiku": false,
		"claude-nova-9": false, "gpt-5.5": false,
	} {
		if got := claude.ClaudeCodePrices(name); got != want {
			t.Errorf("%s: Claude Code prices it %v, want %v", name, got, want)
		}
	}
}
