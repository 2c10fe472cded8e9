package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/purser-dev/purser/backend/meter"
)

// Sub-agents at the door.
//
// Claude Code spawns a sub-agent with a tool call in its model's reply
// (the Agent tool, named Task before 2.1): its input's prompt becomes the
// sub-agent's first user message, the last text block of it, and every
// request the sub-agent then sends starts with that same message. So the
// door, which sees every reply and every request of the call, knows who
// sent each request: it reads the replies for spawns (streamed or not), and
// a request whose conversation starts with a spawn's prompt is that
// sub-agent's; any other is the main agent's. It tells the engine who
// (purser.WireRequest.SubAgent), which caps the spawns and each
// sub-agent's spend, and books a reply it is the source of truth of under
// the sub-agent's name.

// spawnTools are the names of the tool that spawns a sub-agent.
var spawnTools = map[string]bool{"Agent": true, "Task": true}

// maxSpawnInput bounds what the door keeps of one spawn's tool input.
const maxSpawnInput = 1 << 20

// maxSubAgentName bounds a sub-agent's name, as backend/claude bounds it.
const maxSubAgentName = 120

// spawn is one sub-agent the main agent started on this lane.
type spawn struct {
	prompt  string
	name    string // "type: description"
	claimed bool   // its first request came
}

// subAgents is what a lane knows of its sub-agents.
type subAgents struct {
	mu     sync.Mutex
	spawns []spawn      // spawn k is spawns[k-1]
	codex  codexThreads // Codex's spawned threads (codexsub.go)
}

// spawnInput is the part of the Agent tool's input the door reads.
type spawnInput struct {
	Prompt       string `json:"prompt"`
	Description  string `json:"description"`
	SubagentType string `json:"subagent_type"`
}

// record adds a spawn from its tool input (JSON); input the door cannot
// read, or without a prompt, starts nothing it could recognise.
func (s *subAgents) record(input []byte) {
	var in spawnInput
	if json.Unmarshal(input, &in) != nil || in.Prompt == "" {
		return
	}
	kind := in.SubagentType
	if kind == "" {
		kind = "general-purpose"
	}
	name := kind + ": " + in.Description
	if r := []rune(name); len(r) > maxSubAgentName {
		name = string(r[:maxSubAgentName-1]) + "…"
	}
	s.mu.Lock()
	s.spawns = append(s.spawns, spawn{prompt: in.Prompt, name: name})
	s.mu.Unlock()
}

// whoSent tells which sub-agent sent an Anthropic request body: 0 (the
// main agent) or k, and k's name. A conversation of one message is a
// sub-agent's first request: it claims the earliest unclaimed spawn of
// that prompt; a longer one is the latest claimed sub-agent's.
func (s *subAgents) whoSent(body []byte) (int, string) {
	s.mu.Lock()
	none := len(s.spawns) == 0
	s.mu.Unlock()
	if none {
		return 0, "" // nothing to read for on a lane with no spawn
	}
	msg, first, ok := firstMessage(body)
	if !ok || msg.Role != "user" {
		return 0, ""
	}
	texts := messageTexts(msg.Content)
	s.mu.Lock()
	defer s.mu.Unlock()
	found := 0
	for i := range s.spawns {
		sp := &s.spawns[i]
		if !contains(texts, sp.prompt) {
			continue
		}
		switch {
		case first && !sp.claimed:
			sp.claimed = true
			return i + 1, sp.name
		case first && found == 0, !first && sp.claimed:
			found = i + 1 // a retry of a first request, or a follow-up
		}
	}
	if found == 0 {
		return 0, ""
	}
	return found, s.spawns[found-1].name
}

// message is the part of a conversation's message the door reads.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// firstMessage reads a request's first message, and whether it is the only
// one, without reading past it: Claude Code sends the messages before its
// system prompt and tools, the bulk of a request.
func firstMessage(body []byte) (m message, alone, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return m, false, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return m, false, false
		}
		if key != "messages" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return m, false, false
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') || !dec.More() {
			return m, false, false
		}
		if dec.Decode(&m) != nil {
			return m, false, false
		}
		return m, !dec.More(), true
	}
	return m, false, false
}

// messageTexts is a message content's text: the string, or each text block.
func messageTexts(c json.RawMessage) []string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return []string{s}
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &blocks) != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		if b.Type == "text" {
			out = append(out, b.Text)
		}
	}
	return out
}

func contains(texts []string, s string) bool {
	for _, t := range texts {
		if t == s {
			return true
		}
	}
	return false
}

// watch reads an Anthropic reply for spawns as it passes (body returned
// as is for any other protocol): the spawn is known before the agent has
// read its tool call, so before the sub-agent's first request.
func (s *subAgents) watch(api string, sse bool, body io.ReadCloser) io.ReadCloser {
	if api != meter.APIAnthropic {
		return body
	}
	return &spawnReader{ReadCloser: body, w: &spawnWatcher{subs: s, sse: sse, open: map[int]*bytes.Buffer{}}}
}

// spawnReader hands a reply's bytes to its watcher as they are read, and
// tells it the reply's end.
type spawnReader struct {
	io.ReadCloser
	w *spawnWatcher
}

func (r *spawnReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		_, _ = r.w.Write(p[:n])
	}
	if err == io.EOF && !r.w.sse {
		r.w.jsonReply()
	}
	return n, err
}

// spawnWatcher finds the spawns in a reply: in a stream, a tool_use
// block's input comes in input_json_delta pieces between its start and
// its stop; in a JSON body, whole in its content.
type spawnWatcher struct {
	subs *subAgents
	sse  bool
	line []byte                // a stream's line being read
	open map[int]*bytes.Buffer // per content block index: a spawn's input so far
	body []byte                // a JSON reply, whole
	over bool                  // more than the watcher keeps: it stopped looking
}

// Write takes the reply's bytes as they come; it never fails.
func (w *spawnWatcher) Write(p []byte) (int, error) {
	if w.over {
		return len(p), nil
	}
	if !w.sse {
		if w.body = append(w.body, p...); len(w.body) > maxSpawnInput {
			w.over, w.body = true, nil
		}
		return len(p), nil
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.line = append(w.line, rest...)
			if len(w.line) > maxSpawnInput {
				w.line = w.line[:0] // an oversized line is no spawn event the door reads
			}
			break
		}
		w.line = append(w.line, rest[:i]...)
		w.event(bytes.TrimSpace(w.line))
		w.line = w.line[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}

// streamEvent is the part of an Anthropic stream event the watcher reads.
type streamEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
}

// event reads one line of the stream.
func (w *spawnWatcher) event(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	var ev streamEvent
	if json.Unmarshal(bytes.TrimSpace(data), &ev) != nil {
		return
	}
	switch ev.Type {
	case "content_block_start":
		if ev.ContentBlock != nil && ev.ContentBlock.Type == "tool_use" && spawnTools[ev.ContentBlock.Name] {
			w.open[ev.Index] = &bytes.Buffer{}
		}
	case "content_block_delta":
		if b := w.open[ev.Index]; b != nil && ev.Delta != nil && ev.Delta.Type == "input_json_delta" {
			if b.Len()+len(ev.Delta.PartialJSON) > maxSpawnInput {
				delete(w.open, ev.Index)
				return
			}
			b.WriteString(ev.Delta.PartialJSON)
		}
	case "content_block_stop":
		if b := w.open[ev.Index]; b != nil {
			delete(w.open, ev.Index)
			w.subs.record(b.Bytes())
		}
	}
}

// jsonReply records the spawns of a whole JSON reply (at its end), once.
func (w *spawnWatcher) jsonReply() {
	if w.over {
		return
	}
	var reply struct {
		Content []struct {
			Type  string          `json:"type"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	body := w.body
	w.over, w.body = true, nil
	if json.Unmarshal(body, &reply) != nil {
		return
	}
	for _, c := range reply.Content {
		if c.Type == "tool_use" && spawnTools[c.Name] {
			w.subs.record(c.Input)
		}
	}
}

// bookFor is the booking of a reply to rt: the lane's, with the reply's
// usage also handed to the grant's Used and, on a lane that is its call's
// source of truth, booked under the sub-agent that sent the request.
func (l *Lane) bookFor(rt route) func(meter.Usage) {
	if rt.subAgent == "" && rt.used == nil {
		return l.book
	}
	return func(u meter.Usage) {
		l.bookAs(u, rt.subAgent, rt.used)
	}
}

// subAgentOf is who sent a request, and its name in the ledger.
func (l *Lane) subAgentOf(rt route, body []byte) (int, string) {
	switch rt.api {
	case meter.APIAnthropic:
		return l.subs.whoSent(body)
	case meter.APIResponses:
		return l.subs.whoSentCodex(rt.codex)
	}
	return 0, ""
}
