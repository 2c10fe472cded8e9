package gateway

import (
	"sync"
)

// The door counts a request's input before the provider does: admission
// holds that count plus the output bound, so the count must not fall short
// of what the provider will bill, or two requests near a cap could pass it
// together. No tokenizer of every provider runs offline (Anthropic's and
// Gemini's are not published; OpenAI's would count only OpenAI's models),
// so the door counts by the body's bytes:
//
//   - A request of a provider and model the door has not yet seen a reply
//     of is counted at bytesPerToken: JSON's quotes, keys and escapes make
//     a body longer than its text, so bytes/4 of the body is at least the
//     text's own bytes/4 (English prose and code run 3.5–4.5 bytes a token).
//   - Each reply's own usage then says how many input tokens the provider
//     billed for how many bytes. The door keeps, per upstream and model, the
//     most tokens a byte has ever cost there, and counts every later request
//     at that rate plus learnMargin, never less than minCount. The margin
//     never takes the count past bytes/4, the count before any reply: where
//     the rate itself is past it (a provider billing a short body more than
//     its bytes/4, as the mock bills a side call 50 tokens whatever its
//     size), the count is the rate alone — still no less than bytes/4 or
//     than the densest reply seen. A tool
//     schema's JSON costs far fewer tokens a byte than prose (Claude Code's
//     first request is ~120 KB of which most is tool schemas): bytes/4 said
//     30,000 tokens where 5,560 were billed, so a small cap refused a
//     request that fitted many times over.
//
// The rate is learned only upward: a reply billing more a byte than any
// before raises it for every request after, and no reply lowers it. A
// request whose text is denser than anything the door has seen (a long
// stretch of CJK after English) can still be billed more than counted; the
// margin is there for that, and the reply's own usage is what the ledger
// books either way.
const bytesPerToken = 4

// learnMargin is what the door adds to a learned rate, in percent.
const learnMargin = 25

// minCount is the least the door counts a request's input at once it has
// learned a rate: a few tokens of framing that a short body's bytes do not
// show.
const minCount = 16

// rateScale is the fixed point of a learned rate: tokens per rateScale
// bytes (integers, so that counts are exact and repeatable).
const rateScale = 1_000_000

// rateKey is what a learned rate belongs to: the provider's tokenizer, by
// the upstream it is reached at and the model billed.
type rateKey struct{ upstream, model string }

// rates are the learned rates, shared by every lane of the process: a
// CLI's every call opens a lane of its own, and its second call's first
// request should be counted as well as its first call's last.
var rates = struct {
	mu sync.Mutex
	m  map[rateKey]int64
}{m: map[rateKey]int64{}}

// countInput is the door's count of the input tokens of a body of n bytes
// for model at upstream, and whether it came from a learned rate.
func countInput(upstream, model string, n int) (tokens int64, learned bool) {
	floor := (int64(n) + bytesPerToken - 1) / bytesPerToken
	rates.mu.Lock()
	r := rates.m[rateKey{upstream, model}]
	rates.mu.Unlock()
	if r == 0 || n == 0 {
		return floor, false
	}
	at := ceilDiv(int64(n)*r, rateScale)
	margin := ceilDiv(int64(n)*r*(100+learnMargin), rateScale*100)
	return max(at, min(margin, floor), minCount), true
}

// learnRate records that the provider billed billed input tokens for a
// body of n bytes sent for model at upstream, raising the rate when it
// cost more a byte than any reply before.
func learnRate(upstream, model string, n int, billed int64) {
	if n <= 0 || billed <= 0 || model == "" {
		return
	}
	// At most a token a byte: a body naming what it does not carry (a
	// file by its URI) says nothing of the rate of the bodies that do.
	r := min(ceilDiv(billed*rateScale, int64(n)), rateScale)
	rates.mu.Lock()
	defer rates.mu.Unlock()
	k := rateKey{upstream, model}
	if r > rates.m[k] {
		rates.m[k] = r
	}
}

// ceilDiv is a/b rounded up, for a ≥ 0 and b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
