package claude_test

import (
	"fmt"
	"testing"

	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/internal/fixturetest"
	"github.com/purser-dev/purser/budget"
)

// longRequest is one streamed Claude request as Claude Code prints it with
// --include-partial-messages (the captured fixtures' shape): message_start
// with the input and output 1, then message_delta with the output.
func longRequest(input, cacheRead, output int64, tier string) []string {
	start := fmt.Sprintf(`{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_long","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":1,"service_tier":%q}}},"session_id":"s","parent_tool_use_id":null}`,
		input, cacheRead, tier)
	delta := fmt.Sprintf(`{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":%d}},"session_id":"s","parent_tool_use_id":null}`,
		input, cacheRead, output)
	return []string{start, delta, `{"type":"stream_event","event":{"type":"message_stop"},"session_id":"s","parent_tool_use_id":null}`}
}

// Issue 22, item 9: a request above 200k input tokens is billed at the
// long-context rates for its output too. The output arrives in its own
// event; priced alone (no input) it missed the tier: a 250k Sonnet 4.5 call
// with 10k output was $1.5960075, not $1.671.
func TestLongContextOutputPricedAtTheRequestsTier(t *testing.T) {
	p := claude.NewParser()
	var evs []budget.UsageEvent
	for _, l := range longRequest(240000, 10000, 10000, "standard") {
		got, err := p.Feed([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, got...)
	}
	if len(evs) != 2 {
		t.Fatalf("%d events, want message_start's and message_delta's: %+v", len(evs), evs)
	}
	var streamed budget.Totals
	for _, ev := range evs {
		streamed.Add(fixturetest.Price(ev))
	}
	whole := fixturetest.Price(budget.UsageEvent{InputTokens: 250000, CacheReadTokens: 10000, OutputTokens: 10000, Model: "claude-sonnet-4-5"})
	want, _ := budget.ParseUSD("1.671") // 240k × $6 + 10k × $0.60 + 10k × $22.50 per MTok
	if whole.USD != want {
		t.Fatalf("the whole request is priced %s by the table, want %s", whole.USD, want)
	}
	if streamed.USD != want || streamed.Tokens != 260000 {
		t.Fatalf("streamed %d tokens at %s, want 260000 at %s, the request priced whole", streamed.Tokens, streamed.USD, want)
	}
	// The output's event keeps the tier its message_start named
	// (message_delta names none): a priority request's output is priority.
	p = claude.NewParser()
	for _, l := range longRequest(1000, 0, 50, "priority") {
		got, err := p.Feed([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range got {
			if ev.ServiceTier != "priority" {
				t.Fatalf("event %+v: want the request's priority tier", ev)
			}
		}
	}
}
