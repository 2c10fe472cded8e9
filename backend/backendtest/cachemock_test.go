package backendtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

func post(t *testing.T, url string, body any) string {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	return string(out)
}

type m = map[string]any

func words(n int) string { return strings.Repeat("tok ", n) }

// The Anthropic cache: a prefix up to a cache_control breakpoint is written
// once, read by the requests that share it (on the same model only), and
// a change before the breakpoint breaks it; the bill is the pricing
// table's, exactly.
func TestCacheMockAnthropicPrefixes(t *testing.T) {
	mock := &backendtest.CacheMock{}
	url := mock.Start(t) + "/v1/messages"
	sys := []m{{"type": "text", "text": words(3000), "cache_control": m{"type": "ephemeral"}}}
	turn := func(model string, system []m, msgs ...m) backendtest.CacheRequest {
		post(t, url, m{"model": model, "max_tokens": 100, "system": system, "messages": msgs})
		rs := mock.Requests()
		return rs[len(rs)-1]
	}
	user := func(text string, bp bool) m {
		b := m{"type": "text", "text": text}
		if bp {
			b["cache_control"] = m{"type": "ephemeral"}
		}
		return m{"role": "user", "content": []m{b}}
	}
	r1 := turn("claude-sonnet-4-5", sys, user("hello [reply 40]", true))
	if r1.CacheRead != 0 || r1.CacheWrite != r1.Input || r1.Output != 40 || r1.Input < 3000 {
		t.Fatalf("first request %+v: want the whole prompt written, 40 out", r1)
	}
	r2 := turn("claude-sonnet-4-5", sys, user("hello [reply 40]", false), m{"role": "assistant", "content": words(40)}, user(words(500)+"[reply 500]", true))
	if r2.CacheRead != r1.CacheWrite || r2.CacheWrite != r2.Input-r1.Input || r2.Output != 100 || !r2.Cut {
		t.Fatalf("second request %+v after %+v: want the first prompt read, the rest written, cut at 100", r2, r1)
	}
	if r := turn("claude-haiku-4-5", sys, user("hello [reply 40]", true)); r.CacheRead != 0 {
		t.Fatalf("another model read %d cached tokens, want 0", r.CacheRead)
	}
	changed := []m{{"type": "text", "text": "x" + words(3000), "cache_control": m{"type": "ephemeral"}}}
	if r := turn("claude-sonnet-4-5", changed, user("hello [reply 40]", true)); r.CacheRead != 0 || r.CacheWrite != r.Input {
		t.Fatalf("a changed system prompt %+v: want nothing read, all written", r)
	}
	short := []m{{"type": "text", "text": "short", "cache_control": m{"type": "ephemeral"}}}
	if r := turn("claude-sonnet-4-5", short, m{"role": "user", "content": "hi"}); r.CacheWrite != 0 {
		t.Fatalf("a prefix under the minimum was written: %+v", r)
	}
	var want budget.USD
	for _, r := range mock.Requests() {
		ev := pricing.Builtin().Estimate(budget.UsageEvent{Model: r.Model, InputTokens: r.Input, CacheReadTokens: r.CacheRead, CacheWriteTokens: r.CacheWrite, OutputTokens: r.Output})
		if ev.USD != r.USD || ev.USD == 0 {
			t.Fatalf("request %+v billed %s, the table says %s", r, r.USD, ev.USD)
		}
		want = want.Plus(ev.USD)
	}
	if got := mock.Bill().USD; got != want {
		t.Fatalf("bill %s, want the sum %s", got, want)
	}
	// r2 by hand, in nano-dollars a token: sonnet input $3/M, cache write
	// $3.75/M, read $0.30/M, output $15/M.
	hand := budget.USD((r2.Input-r2.CacheRead-r2.CacheWrite)*3000 + r2.CacheWrite*3750 + r2.CacheRead*300 + r2.Output*15000)
	if r2.USD != hand {
		t.Fatalf("second request billed %s, by hand %s", r2.USD, hand)
	}
}

// OpenAI caches automatically: a prompt sharing a prefix of 1,024 tokens or
// more with an earlier one reads it, in steps of 128 tokens; both APIs,
// streaming or not, say so in their own usage fields.
func TestCacheMockOpenAIAutomaticPrefix(t *testing.T) {
	mock := &backendtest.CacheMock{}
	base := mock.Start(t)
	long := words(2000)
	chat := func(stream bool, msgs ...m) string {
		return post(t, base+"/v1/chat/completions", m{"model": "gpt-5-mini", "stream": stream, "messages": msgs})
	}
	chat(false, m{"role": "system", "content": long}, m{"role": "user", "content": "one"})
	out := chat(true, m{"role": "system", "content": long}, m{"role": "user", "content": "one"}, m{"role": "assistant", "content": "x"}, m{"role": "user", "content": "two [reply 7]"})
	rs := mock.Requests()
	first, second := rs[0], rs[1]
	if first.CacheRead != 0 || second.CacheRead == 0 || second.CacheRead%128 != 0 || second.CacheRead > first.Input || first.Input-second.CacheRead >= 128 {
		t.Fatalf("requests %+v %+v: want the first prompt read in 128-token steps", first, second)
	}
	if !strings.Contains(out, `"cached_tokens":`) || !strings.Contains(out, "data: [DONE]") || second.Output != 7 {
		t.Fatalf("stream %s", out)
	}
	out = post(t, base+"/v1/responses", m{"model": "gpt-5-mini", "input": long, "max_output_tokens": 5})
	if r := mock.Requests()[2]; r.CacheRead != 0 || !r.Cut || !strings.Contains(out, `"incomplete"`) {
		t.Fatalf("responses %+v %s: another API has its own cache; the reply is cut at 5", r, out)
	}
}
