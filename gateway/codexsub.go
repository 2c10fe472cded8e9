package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Codex's sub-agents at the door.
//
// Codex (codex-cli 0.169, feature multi_agent_v2) spawns a sub-agent with
// its collaboration tool spawn_agent. The sub-agent is a thread of its own,
// and each of its requests says so in its headers: thread-id is its
// thread, x-codex-parent-thread-id the thread that spawned it,
// x-openai-subagent is collab_spawn, and x-codex-turn-metadata's
// agent_name is its task path (/root/part_1). The main agent's requests
// carry no parent. So, unlike Claude Code's, Codex's sub-agents need no
// reading of replies: a spawned thread the lane has not seen is the next
// spawn, k, and every later request of that thread is k's. Codex's other
// threads of its own (review, compact, memory consolidation: another
// x-openai-subagent) are the main agent's machinery, booked to it, as is a
// request that names no thread (not Codex, or an older one).

// codexSpawnKind is x-openai-subagent on a thread spawn_agent started.
const codexSpawnKind = "collab_spawn"

// codexThread is the thread a Responses request says it comes from.
type codexThread struct {
	id     string // thread-id
	parent string // x-codex-parent-thread-id
	kind   string // x-openai-subagent
	name   string // x-codex-turn-metadata's agent_name
}

// codexThreadOf reads a request's thread from its headers.
func codexThreadOf(h http.Header) codexThread {
	t := codexThread{id: strings.TrimSpace(h.Get("thread-id")), parent: strings.TrimSpace(h.Get("x-codex-parent-thread-id")),
		kind: strings.TrimSpace(h.Get("x-openai-subagent"))}
	if t.parent == "" || t.id == "" {
		return t // the main agent's: nothing more to read
	}
	var meta struct {
		AgentName string `json:"agent_name"`
	}
	if m := h.Get("x-codex-turn-metadata"); m != "" && json.Unmarshal([]byte(m), &meta) == nil {
		t.name = strings.TrimSpace(meta.AgentName)
	}
	return t
}

// spawned reports whether the thread is a sub-agent spawn_agent started.
func (t codexThread) spawned() bool {
	return t.id != "" && t.parent != "" && t.id != t.parent && t.kind == codexSpawnKind
}

// codexThreads numbers a lane's spawned threads in the order their first
// request came (kept with the lane's spawns, under subAgents.mu).
type codexThreads struct {
	k    map[string]int // thread id → its spawn number
	name []string       // spawn k's name is name[k-1]
}

// whoSentCodex tells which sub-agent sent a Responses request of thread t:
// 0 (the main agent) or k, and k's name in the ledger: its task path, as
// backend/codex names it from the sub-agent's rollout.
func (s *subAgents) whoSentCodex(t codexThread) (int, string) {
	if !t.spawned() {
		return 0, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.codex
	if k, ok := c.k[t.id]; ok {
		return k, c.name[k-1]
	}
	if c.k == nil {
		c.k = map[string]int{}
	}
	name := t.name
	if name == "" {
		name = "thread " + t.id
	}
	if r := []rune(name); len(r) > maxSubAgentName {
		name = string(r[:maxSubAgentName-1]) + "…"
	}
	c.name = append(c.name, name)
	c.k[t.id] = len(c.name)
	return len(c.name), name
}
