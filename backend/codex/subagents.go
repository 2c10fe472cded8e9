package codex

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Codex's sub-agents (multi_agent_v2's spawn_agent) are threads of their
// own: `codex exec --json` and the main thread's rollout report the main
// agent's tokens only, and each sub-agent writes its own rollout, whose
// session_meta names the session (the main thread) and its task path. So a
// call's sub-agents are booked from those rollouts when the call ends,
// each under its task path, the name the door gives the sub-agent's
// requests (gateway/codexsub.go). Codex's multi-agent is the user's to
// switch on (`--enable multi_agent_v2` in the backend's args, or
// [features] in config.toml); Purser does not change what the agent may do.

// maxSubAgentName bounds a sub-agent's name, as the door bounds it.
const maxSubAgentName = 120

// maxMetaLine bounds the session_meta line read of a rollout (it carries
// Codex's base instructions).
const maxMetaLine = 4 << 20

// rolloutMeta is the part of a rollout's session_meta line read here.
type rolloutMeta struct {
	Type    string `json:"type"`
	Payload struct {
		ID        string `json:"id"`
		SessionID string `json:"session_id"`
		Source    struct {
			SubAgent *struct {
				ThreadSpawn *struct {
					AgentPath string `json:"agent_path"`
				} `json:"thread_spawn"`
			} `json:"subagent"`
		} `json:"source"`
	} `json:"payload"`
}

// bookSubAgents reports the spend of the sub-agents the call's Codex
// spawned, read from their rollout files, each under its name.
func (b *Backend) bookSubAgents(req purser.CallRequest, p *Parser, report purser.UsageFunc) {
	thread, _, _, _, _ := p.state()
	for _, ev := range subAgentSpend(filepath.Join(b.sessionsHome(req.TaskID), "sessions"), thread, req.Model) {
		report(ev)
	}
}

// subAgentSpend is the spend of the sub-agents of session thread whose
// rollouts are under sessions: one event per sub-agent (and model), its
// Agent the sub-agent's name. Rollouts last written before the thread
// began are not read.
func subAgentSpend(sessions, thread, model string) []budget.UsageEvent {
	if thread == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(sessions, "*", "*", "*", "rollout-*.jsonl"))
	since, timed := threadStart(thread)
	var out []budget.UsageEvent
	for _, f := range files {
		if strings.HasSuffix(f, thread+".jsonl") {
			continue // the main thread's own
		}
		if st, err := os.Stat(f); err != nil || (timed && st.ModTime().Before(since)) {
			continue
		}
		name, ok := spawnedBy(f, thread)
		if !ok {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, ev := range NewParser(model).Recover(data) {
			ev.Agent = name
			out = append(out, ev)
		}
	}
	return out
}

// spawnedBy reads a rollout's session_meta line: whether it is a thread
// spawn_agent started in session thread, and its name.
func spawnedBy(file, thread string) (string, bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", false
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull || len(line) > maxMetaLine {
			break
		}
	}
	var m rolloutMeta
	if json.Unmarshal(line, &m) != nil || m.Type != "session_meta" || m.Payload.SessionID != thread || m.Payload.ID == thread {
		return "", false
	}
	sa := m.Payload.Source.SubAgent
	if sa == nil || sa.ThreadSpawn == nil {
		return "", false // a review or compaction thread: not a spawned sub-agent
	}
	name := strings.TrimSpace(sa.ThreadSpawn.AgentPath)
	if name == "" {
		name = "thread " + m.Payload.ID
	}
	if r := []rune(name); len(r) > maxSubAgentName {
		name = string(r[:maxSubAgentName-1]) + "…"
	}
	return name, true
}

// threadStart is when a thread began, from its id (a UUIDv7, whose first
// 48 bits are its creation's Unix milliseconds), less a second for clocks;
// false for an id that is not one.
func threadStart(id string) (time.Time, bool) {
	hexID := strings.ReplaceAll(id, "-", "")
	raw, err := hex.DecodeString(hexID)
	if err != nil || len(raw) != 16 || raw[6]>>4 != 7 {
		return time.Time{}, false
	}
	var ms int64
	for _, c := range raw[:6] {
		ms = ms<<8 | int64(c)
	}
	return time.UnixMilli(ms).Add(-time.Second), true
}
