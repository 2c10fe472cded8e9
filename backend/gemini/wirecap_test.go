package gemini

import (
	"testing"

	"github.com/purser-dev/purser/budget"
)

// Issue 22, item 10: the result of a Gemini CLI run whose first stream
// dropped after its first chunk (the shared mock's MOCK_DROP_1, retried by
// Gemini CLI itself) counts that stream's prompt: 16,285 tokens, where the
// provider finished two replies of 5,280 and 5,805. What the wire meter saw
// delivered bounds what is booked; without a meter, or with nothing through
// it, the result stands.
func TestResultBoundedByWhatTheWireDelivered(t *testing.T) {
	result := []byte(`{"type":"result","status":"success","stats":{"models":{"gemini-2.5-pro":{"total_tokens":16285,"input_tokens":16200,"output_tokens":65,"cached":8500}}}}`)
	replies := []budget.UsageEvent{
		{Model: "gemini-2.5-pro", InputTokens: 5200, CacheReadTokens: 4000, OutputTokens: 80, ReasoningTokens: 20},
		{Model: "gemini-2.5-pro", InputTokens: 5800, CacheReadTokens: 4500, OutputTokens: 5},
	}
	booked := func(delivered func() ([]budget.UsageEvent, bool)) (int64, int64) {
		t.Helper()
		p := NewParser()
		if delivered != nil {
			p.MeteredBy(delivered)
		}
		evs, err := p.Feed(result)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, ev := range evs {
			if err := ev.Validate(); err != nil {
				t.Fatal(err)
			}
			n += ev.Tokens()
		}
		return n, p.Undelivered()
	}
	if n, un := booked(func() ([]budget.UsageEvent, bool) { return replies, true }); n != 11085 || un != 5200 {
		t.Fatalf("metered: %d tokens booked, %d not; want 11085 and the dropped prompt's 5200", n, un)
	}
	for name, d := range map[string]func() ([]budget.UsageEvent, bool){
		"not metered":          nil,
		"nothing through it":   func() ([]budget.UsageEvent, bool) { return nil, false },
		"another model's name": func() ([]budget.UsageEvent, bool) { return []budget.UsageEvent{{Model: "models/gemini-2.5-pro", InputTokens: 1}}, true },
	} {
		if n, _ := booked(d); n != 16285 {
			t.Errorf("%s: %d tokens booked, want the result's 16285", name, n)
		}
	}
	// What the chat file gave is never taken back.
	p := NewParser()
	p.MeteredBy(func() ([]budget.UsageEvent, bool) { return nil, true })
	p.FeedChat([]byte(`{"id":"m1","type":"gemini","model":"gemini-2.5-pro","tokens":{"input":5200,"output":60,"cached":4000,"thoughts":20}}`))
	if evs, _ := p.Feed(result); len(evs) != 0 {
		t.Fatalf("%+v: want nothing beyond the chat file's message", evs)
	}
}
