package codex

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/internal/tick"
)

// Codex's sub-agents (multi_agent_v2's spawn_agent) are threads of their
// own: `codex exec --json` and the main thread's rollout report the main
// agent's tokens only, and each sub-agent writes its own rollout, whose
// session_meta names the session (the main thread) and its task path. So a
// call's sub-agents are read from those rollouts, each under its task path
// (the name the door gives the sub-agent's requests, gateway/codexsub.go):
// followed while Codex runs, as the main rollout is, and read to their end
// when it has exited. Where Codex's own report is the call's source (no
// door in front of it) they are booked from there; behind the door, the
// door books the sub-agents' requests under the same names, and the
// rollouts are a cross-check (backend/proc/source.go). Codex's multi-agent is the
// user's to switch on (`--enable multi_agent_v2` in the backend's args, or
// [features] in config.toml): Purser does not change what the agent may do.

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

// subAgentPoll is how often the sub-agents' rollouts are looked for and
// read while Codex runs.
const subAgentPoll = 250 * time.Millisecond

// subAgentFollower follows the rollouts of a call's sub-agents while Codex
// runs, so their usage arrives as they spend it (a hard cap can stop the
// call on it), and reads what is left of them once Codex has exited.
type subAgentFollower struct {
	sessions string
	model    string
	thread   func() string // the call's session, once Codex has named it
	report   purser.UsageFunc

	mu       sync.Mutex
	since    time.Time        // the session's start; zero until known
	timed    bool             // since is known (the thread id is a UUIDv7)
	seen     map[string]bool  // rollouts whose first line was read
	kids     []*proc.Follower // the sub-agents' rollouts
	stopTick func()
	once     sync.Once
}

// followSubAgents starts following the sub-agents of the call's Codex.
func (b *Backend) followSubAgents(req purser.CallRequest, p *Parser, report purser.UsageFunc) *subAgentFollower {
	s := newSubAgentFollower(filepath.Join(b.sessionsHome(req.TaskID), "sessions"), req.Model,
		func() string { thread, _, _, _, _ := p.state(); return thread }, report)
	s.stopTick = tick.Every(subAgentPoll, func() { s.poll(false) })
	return s
}

// newSubAgentFollower follows, under sessions, the sub-agents of the
// session thread names, reporting their usage to report; it is not polled
// until told to.
func newSubAgentFollower(sessions, model string, thread func() string, report purser.UsageFunc) *subAgentFollower {
	return &subAgentFollower{sessions: sessions, model: model, thread: thread, report: report, seen: map[string]bool{}, stopTick: func() {}}
}

// stop stops the polling (once; safe to call again).
func (s *subAgentFollower) stop() { s.once.Do(func() { s.stopTick() }) }

// finish stops the polling and reads what the sub-agents' rollouts hold
// that was not read yet: Codex has exited, so they are whole.
func (s *subAgentFollower) finish() {
	s.stop()
	s.poll(true)
}

// poll finds the session's sub-agents not yet found and reads what their
// rollouts added. Looking everywhere (final, for a session whose start is
// unknown) reads every rollout's first line; else only the days' folders
// from the session's start are listed.
func (s *subAgentFollower) poll(final bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	thread := s.thread()
	if thread == "" {
		return
	}
	if !s.timed {
		s.since, s.timed = threadStart(thread)
	}
	for _, f := range s.candidates(final) {
		if s.seen[f] || strings.HasSuffix(f, thread+".jsonl") {
			continue
		}
		if st, err := os.Stat(f); err != nil || (s.timed && st.ModTime().Before(s.since)) {
			s.seen[f] = true
			continue
		}
		name, ok, whole := spawnedBy(f, thread)
		if !whole {
			continue // its first line is still being written: looked at again
		}
		s.seen[f] = true
		if ok {
			s.kids = append(s.kids, s.kid(f, name))
		}
	}
	for _, k := range s.kids {
		k.Poll()
	}
}

// kid is the follower of sub-agent name's rollout: each running total it
// reads is reported as what it adds, under the sub-agent's name.
func (s *subAgentFollower) kid(file, name string) *proc.Follower {
	p := NewParser(s.model)
	return &proc.Follower{Find: func() string { return file }, OnLine: func(l proc.Line) {
		for _, ev := range p.FeedRollout(l.Text) {
			ev.Agent = name
			s.report(ev)
		}
	}}
}

// candidates are the rollout files that may be the session's sub-agents':
// those of the days from the session's start to now (Codex files a rollout
// under its day, local or UTC), or, final and with no start known, all.
func (s *subAgentFollower) candidates(final bool) []string {
	if !s.timed {
		if !final {
			return nil
		}
		files, _ := filepath.Glob(filepath.Join(s.sessions, "*", "*", "*", "rollout-*.jsonl"))
		return files
	}
	dirs := map[string]bool{}
	for d := s.since.Add(-24 * time.Hour); !d.After(time.Now().Add(24 * time.Hour)); d = d.Add(24 * time.Hour) {
		for _, t := range []time.Time{d.UTC(), d.Local()} {
			dirs[filepath.Join(s.sessions, t.Format("2006"), t.Format("01"), t.Format("02"))] = true
		}
	}
	var files []string
	for dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if n := e.Name(); strings.HasPrefix(n, "rollout-") && strings.HasSuffix(n, ".jsonl") {
				files = append(files, filepath.Join(dir, n))
			}
		}
	}
	return files
}

// spawnedBy reads a rollout's session_meta line: whether it is a thread
// spawn_agent started in session thread, and its name; whole is false
// while that line is still being written.
func spawnedBy(file, thread string) (name string, ok, whole bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", false, true
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return "", false, false // no newline yet
		}
		if len(line) > maxMetaLine {
			return "", false, true
		}
	}
	var m rolloutMeta
	if json.Unmarshal(line, &m) != nil || m.Type != "session_meta" || m.Payload.SessionID != thread || m.Payload.ID == thread {
		return "", false, true
	}
	sa := m.Payload.Source.SubAgent
	if sa == nil || sa.ThreadSpawn == nil {
		return "", false, true // a review or compaction thread: not a spawned sub-agent
	}
	name = strings.TrimSpace(sa.ThreadSpawn.AgentPath)
	if name == "" {
		name = "thread " + m.Payload.ID
	}
	if r := []rune(name); len(r) > maxSubAgentName {
		name = string(r[:maxSubAgentName-1]) + "…"
	}
	return name, true, true
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
