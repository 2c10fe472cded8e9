package meter

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// A hostile upstream's huge events (60 MB each, a dozen of them, once took
// Purser to 2.1 GB) cost a stream a bounded hold, whatever their size; and
// the usage that ends an oversized event is still read, from its tail.
func TestTapHoldIsBoundedAndReadsAnOversizedEventsUsage(t *testing.T) {
	for _, tc := range []struct {
		name, api string
		sse       bool
		head      string
		tail      string
	}{
		{"responses completed", apiResponses, true, `data: {"type":"response.completed","response":{"output":[{"text":"`,
			`"}],"usage":{"input_tokens":11,"output_tokens":22}}}` + "\n\n"},
		{"anthropic json", apiAnthropic, false, `{"model":"m","content":[{"text":"`,
			`"}],"usage":{"input_tokens":11,"output_tokens":22}}`},
		{"chat one line", apiChat, true, `data: {"choices":[{"delta":{"content":"`,
			`"}}],"usage":{"prompt_tokens":11,"completion_tokens":22}}` + "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Usage
			tap := NewTap(tc.api, "m", tc.sse, func(u Usage) { got = append(got, u) })
			chunk := bytes.Repeat([]byte("x"), 32<<10)
			peak := 0
			const events, size = 3, 24 << 20
			for range events {
				_, _ = tap.Write([]byte(tc.head))
				for n := 0; n < size; n += len(chunk) {
					_, _ = tap.Write(chunk)
					peak = max(peak, tap.held())
				}
				_, _ = tap.Write([]byte(tc.tail))
				if !tc.sse {
					break
				}
			}
			tap.End()
			if bound := 3*maxEvent + headKeep + 2*tailKeep; peak > bound {
				t.Errorf("the tap held %d bytes at its peak; bound %d", peak, bound)
			}
			want := events
			if !tc.sse {
				want = 1
			}
			if len(got) != want {
				t.Fatalf("%d usages read; want %d", len(got), want)
			}
			if ev := got[0].Event(); ev.InputTokens != 11 || ev.OutputTokens != 22 {
				t.Errorf("usage %+v; want 11 in, 22 out", ev)
			}
		})
	}
}

// An event within the bound is read whole, as before, even right after an
// oversized one.
func TestTapReadsSmallEventsAfterAnOversizedOne(t *testing.T) {
	var got []Usage
	tap := NewTap(apiChat, "m", true, func(u Usage) { got = append(got, u) })
	_, _ = tap.Write([]byte("data: {\"x\":\"" + strings.Repeat("y", 2*maxEvent) + "\"}\n\n"))
	for i := range 3 {
		_, _ = fmt.Fprintf(tap, "data: {\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":1}}\n\n", i+1)
	}
	tap.End()
	if len(got) != 3 || got[2].Event().InputTokens != 3 {
		t.Fatalf("got %+v; want 3 usages, the last with 3 input tokens", got)
	}
}
