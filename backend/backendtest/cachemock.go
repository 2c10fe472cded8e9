package backendtest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// CacheMock is a fake model provider with a prompt cache, for tests that
// judge an action on what a provider would bill, cache included: the shared
// mock (fixtures/agent-cli/mock) and Mock bill fixed usage, which cannot
// show a degrade that breaks a cached prefix costing more than it saves.
//
// It speaks Anthropic Messages (POST /v1/messages) and OpenAI Chat
// Completions and Responses (POST /v1/chat/completions, /v1/responses),
// streaming or not, and keeps a cache per model:
//
//   - Anthropic caches the prompt (tools, then system, then messages) up to
//     each block marked cache_control: a request reads the longest prefix
//     it shares with one cached before, at a block boundary no later than
//     its last breakpoint, writes the rest up to that breakpoint, and pays
//     fresh input after it. A prefix shorter than MinCacheTokens is not
//     cached.
//   - OpenAI caches every prompt automatically: a request reads the longest
//     prefix it shares with an earlier prompt of the model, at a block
//     boundary, in steps of 128 tokens from MinCacheTokens up; writes cost
//     nothing extra.
//
// A block's tokens are its canonical JSON's bytes / 4, rounded up (so the
// door's bytes/4 count is close). Entries never expire: the tests run in
// well under the providers' five minutes. Each reply is billed by Prices
// as Purser prices usage, exactly (nano-dollars).
type CacheMock struct {
	// Prices bills each request (pricing.Builtin() when nil).
	Prices *pricing.Catalogue
	// MinCacheTokens is the shortest prefix cached (0: 1024, the providers'
	// minimum for most models).
	MinCacheTokens int64
	// DefaultReply is the output of a request whose last user text names no
	// "[reply N]" (0: 64).
	DefaultReply int64

	mu     sync.Mutex
	cached map[string]bool // model + prefix hash → cached
	reqs   []CacheRequest
	bill   budget.Amount
}

// CacheRequest is what the mock billed for one request.
type CacheRequest struct {
	API, Model string
	// Input is the whole prompt; CacheRead and CacheWrite are parts of it.
	Input, CacheRead, CacheWrite, Output int64
	// Cut says the reply stopped at the request's output bound.
	Cut bool
	USD budget.USD
}

// replyDirective asks the mock for a reply of N output tokens.
var replyDirective = regexp.MustCompile(`\[reply (\d+)\]`)

// Start serves the mock on a free port of 127.0.0.1 for the test's life
// and returns its base URL.
func (m *CacheMock) Start(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Bill is what the mock billed so far: dollars and tokens (input with its
// cached part, and output).
func (m *CacheMock) Bill() budget.Amount {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bill
}

// Requests is every request billed so far, in order.
func (m *CacheMock) Requests() []CacheRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]CacheRequest(nil), m.reqs...)
}

// CacheReadTokens is the cache-read tokens of every request billed so far.
func (m *CacheMock) CacheReadTokens() int64 {
	var n int64
	for _, r := range m.Requests() {
		n += r.CacheRead
	}
	return n
}

// block is one piece of a prompt as a cache keys on it.
type block struct {
	key        []byte // canonical JSON, its cache_control left out
	tokens     int64
	breakpoint bool
}

// prompt is a request read for caching and replying.
type prompt struct {
	api, model string
	blocks     []block
	maxOut     int64 // 0: none
	stream     bool
	lastUser   string
}

// ServeHTTP answers one model request.
func (m *CacheMock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var raw map[string]json.RawMessage
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&raw) != nil {
		http.Error(w, `{"error":{"message":"cache mock: want a POST of a JSON object"}}`, http.StatusBadRequest)
		return
	}
	var p prompt
	var err error
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages"):
		p, err = anthropicPrompt(raw)
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		p, err = chatPrompt(raw)
	case strings.HasSuffix(r.URL.Path, "/responses"):
		p, err = responsesPrompt(raw)
	default:
		http.Error(w, `{"error":{"message":"cache mock: unknown route"}}`, http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, fmt.Sprintf(`{"error":{"message":%q}}`, "cache mock: "+err.Error()), http.StatusBadRequest)
		return
	}
	rq := m.bill1(p)
	text := strings.Repeat("tok ", int(rq.Output))
	if p.stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	for _, ev := range replyEvents(p, rq, text) {
		_, _ = w.Write(ev)
	}
}

// bill1 applies the model's cache to one request, bills it and records it.
func (m *CacheMock) bill1(p prompt) CacheRequest {
	minimum := m.MinCacheTokens
	if minimum <= 0 {
		minimum = 1024
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cached == nil {
		m.cached = map[string]bool{}
	}
	h := sha256.New()
	h.Write([]byte(p.api + "\x00" + p.model + "\x00"))
	keys := make([]string, len(p.blocks)) // keys[i]: the prefix through block i
	ends := make([]int64, len(p.blocks))  // ends[i]: its tokens
	var total int64
	last := -1
	for i, b := range p.blocks {
		h.Write(b.key)
		h.Write([]byte{0})
		keys[i] = string(h.Sum(nil))
		total += b.tokens
		ends[i] = total
		if b.breakpoint {
			last = i
		}
	}
	rq := CacheRequest{API: p.api, Model: p.model, Input: total}
	if p.api == "anthropic" {
		for i := last; i >= 0; i-- {
			if m.cached[keys[i]] {
				rq.CacheRead = ends[i]
				break
			}
		}
		for i, b := range p.blocks[:last+1] {
			if b.breakpoint && ends[i] >= minimum && ends[i] > rq.CacheRead {
				m.cached[keys[i]] = true
				rq.CacheWrite = ends[i] - rq.CacheRead
			}
		}
	} else {
		for i := len(keys) - 1; i >= 0; i-- {
			if m.cached[keys[i]] && ends[i] >= minimum {
				rq.CacheRead = minimum + (ends[i]-minimum)/128*128
				break
			}
		}
		for _, k := range keys {
			m.cached[k] = true
		}
	}
	rq.Output = m.DefaultReply
	if rq.Output <= 0 {
		rq.Output = 64
	}
	if d := replyDirective.FindStringSubmatch(p.lastUser); d != nil {
		rq.Output, _ = strconv.ParseInt(d[1], 10, 64)
	}
	if p.maxOut > 0 && rq.Output > p.maxOut {
		rq.Output, rq.Cut = p.maxOut, true
	}
	prices := m.Prices
	if prices == nil {
		prices = pricing.Builtin()
	}
	ev := prices.Estimate(budget.UsageEvent{Model: p.model, InputTokens: rq.Input, CacheReadTokens: rq.CacheRead,
		CacheWriteTokens: rq.CacheWrite, OutputTokens: rq.Output})
	rq.USD = ev.USD
	m.reqs = append(m.reqs, rq)
	m.bill.USD = m.bill.USD.Plus(ev.USD)
	m.bill.Tokens += rq.Input + rq.Output
	return rq
}

// newBlock is a block of a prompt: role (or kind) and its JSON, whose
// cache_control marks a breakpoint and is not part of what is cached.
func newBlock(role string, raw json.RawMessage) block {
	var obj map[string]any
	b := block{}
	if json.Unmarshal(raw, &obj) == nil && obj != nil {
		_, b.breakpoint = obj["cache_control"]
		delete(obj, "cache_control")
		raw, _ = json.Marshal(obj)
	}
	b.key = append([]byte(role+":"), raw...)
	b.tokens = max(1, (int64(len(raw))+3)/4)
	return b
}

// textBlock is a string content as the one text block it stands for.
func textBlock(role, s string) block {
	raw, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return newBlock(role, raw)
}

// contentBlocks reads a content that is a string or an array of blocks,
// and the text it carries.
func contentBlocks(role string, raw json.RawMessage) ([]block, string) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{textBlock(role, s)}, s
	}
	var arr []json.RawMessage
	_ = json.Unmarshal(raw, &arr)
	var out []block
	var text strings.Builder
	for _, el := range arr {
		out = append(out, newBlock(role, el))
		var t struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(el, &t) == nil {
			text.WriteString(t.Text)
		}
	}
	return out, text.String()
}

// message is one message of a conversation, in any of the three APIs.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// common reads model, stream and the output bound named by key.
func common(raw map[string]json.RawMessage, api string, maxKeys ...string) (prompt, error) {
	p := prompt{api: api}
	if json.Unmarshal(raw["model"], &p.model) != nil || p.model == "" {
		return p, fmt.Errorf("no model")
	}
	_ = json.Unmarshal(raw["stream"], &p.stream)
	for _, k := range maxKeys {
		if v, ok := raw[k]; ok {
			_ = json.Unmarshal(v, &p.maxOut)
		}
	}
	return p, nil
}

// messagesBlocks appends a conversation's blocks to p.
func (p *prompt) messages(raw json.RawMessage) error {
	var msgs []message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	for _, msg := range msgs {
		bs, text := contentBlocks(msg.Role, msg.Content)
		p.blocks = append(p.blocks, bs...)
		if msg.Role == "user" {
			p.lastUser = text
		}
	}
	return nil
}

func anthropicPrompt(raw map[string]json.RawMessage) (prompt, error) {
	p, err := common(raw, "anthropic", "max_tokens")
	if err != nil {
		return p, err
	}
	var tools []json.RawMessage
	_ = json.Unmarshal(raw["tools"], &tools)
	for _, t := range tools {
		p.blocks = append(p.blocks, newBlock("tool", t))
	}
	if sys, ok := raw["system"]; ok {
		bs, _ := contentBlocks("system", sys)
		p.blocks = append(p.blocks, bs...)
	}
	return p, p.messages(raw["messages"])
}

func chatPrompt(raw map[string]json.RawMessage) (prompt, error) {
	p, err := common(raw, "chat", "max_tokens", "max_completion_tokens")
	if err != nil {
		return p, err
	}
	return p, p.messages(raw["messages"])
}

func responsesPrompt(raw map[string]json.RawMessage) (prompt, error) {
	p, err := common(raw, "responses", "max_output_tokens")
	if err != nil {
		return p, err
	}
	var instr string
	if json.Unmarshal(raw["instructions"], &instr) == nil && instr != "" {
		p.blocks = append(p.blocks, textBlock("system", instr))
	}
	var s string
	if json.Unmarshal(raw["input"], &s) == nil {
		p.blocks, p.lastUser = append(p.blocks, textBlock("user", s)), s
		return p, nil
	}
	return p, p.messages(raw["input"])
}
