package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

// rolloutLines is a rollout as codex-cli 0.169.0 writes one, in short: its
// session_meta (source: a spawned sub-agent's, or "exec"), its turn
// context, then a running total after each of n model calls of 100 input
// (40 cached) and 5 output tokens.
func rolloutLines(id, session, source string, n int) string {
	s := fmt.Sprintf(`{"timestamp":"2026-11-26T07:02:58.044Z","type":"session_meta","payload":{"session_id":%q,"id":%q,"source":%s,"base_instructions":{"text":"You are Codex."}}}`+"\n", session, id, source)
	s += `{"type":"turn_context","payload":{"model":"gpt-5.5"}}` + "\n"
	for i := 1; i <= n; i++ {
		s += fmt.Sprintf(`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":%d,"cached_input_tokens":%d,"output_tokens":%d,"reasoning_output_tokens":0,"total_tokens":%d}}}}`+"\n", 100*i, 40*i, 5*i, 105*i)
	}
	return s
}

func spawnSource(parent, path string) string {
	return fmt.Sprintf(`{"subagent":{"thread_spawn":{"parent_thread_id":%q,"depth":1,"agent_path":%q,"agent_nickname":"Hilbert","agent_role":null}}}`, parent, path)
}

// spendOf follows the sub-agents of session root under sessions, as the
// backend does, and returns what each was booked (input, cached, output).
type spendOf struct {
	mu  sync.Mutex
	got map[string][3]int64
}

func (s *spendOf) report(ev budget.UsageEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Model != "gpt-5.5" {
		ev.Agent += " (model " + ev.Model + ")"
	}
	g := s.got[ev.Agent]
	s.got[ev.Agent] = [3]int64{g[0] + ev.InputTokens, g[1] + ev.CacheReadTokens, g[2] + ev.OutputTokens}
}

func (s *spendOf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.got)
}

// A call's sub-agents are booked from their own rollouts as they grow:
// each spawned thread of the call's session, under its task path, what
// each running total adds. A rollout whose first line is still being
// written is looked at again. The main thread's rollout (the stream's and
// its follower's), a review thread of the session, a sub-agent of another
// session, and a rollout last written before the session began are not
// read; at the end, what was left is.
func TestSubAgentFollowerReadsTheSpawnedThreadsRollouts(t *testing.T) {
	const root = "01a216aa-2046-7c02-8791-c81c29ddc76c"
	sessions := t.TempDir()
	begun, ok := threadStart(root)
	if !ok || begun.Year() != 2026 {
		t.Fatalf("threadStart(%s) = %v %v, want a time in 2026", root, begun, ok)
	}
	day := filepath.Join(sessions, time.Now().Format("2006/01/02"))
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(id, body string) string {
		f := filepath.Join(day, "rollout-2026-11-26T07-02-58-"+id+".jsonl")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	const one, two = "01a216aa-20e1-7a60-9381-2426c7c16747", "01a216aa-20e2-7a60-9381-2426c7c16747"
	write(root, rolloutLines(root, root, `"exec"`, 3))
	partOne := write(one, rolloutLines(one, root, spawnSource(root, "/root/part_1"), 1))
	full := rolloutLines(two, root, spawnSource(root, "/root/part_2"), 1)
	partTwo := write(two, full[:40]) // its session_meta line half written
	write("01a216aa-20e3-7a60-9381-2426c7c16747", rolloutLines("01a216aa-20e3-7a60-9381-2426c7c16747", root, `{"subagent":"review"}`, 4))
	write("01a216aa-20e4-7a60-9381-2426c7c16747", rolloutLines("01a216aa-20e4-7a60-9381-2426c7c16747", "01a216aa-0000-7000-8000-000000000000", spawnSource("01a216aa-0000-7000-8000-000000000000", "/root/other"), 4))
	old := write("01a216aa-20e5-7a60-9381-2426c7c16747", rolloutLines("01a216aa-20e5-7a60-9381-2426c7c16747", root, spawnSource(root, "/root/old"), 4))
	if err := os.Chtimes(old, begun.Add(-time.Hour), begun.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	var spend spendOf
	spend.got = map[string][3]int64{}
	f := newSubAgentFollower(sessions, "", func() string { return root }, spend.report)
	f.poll(false)
	if got, want := spend.String(), fmt.Sprint(map[string][3]int64{"/root/part_1": {100, 40, 5}}); got != want {
		t.Errorf("first poll: spend per sub-agent %s, want %s", got, want)
	}
	// part 1's second model call, and part 2's first line whole.
	if err := os.WriteFile(partOne, []byte(rolloutLines(one, root, spawnSource(root, "/root/part_1"), 2)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(partTwo, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	f.poll(false)
	f.finish()
	f.finish() // a second finish reads nothing twice
	if got, want := spend.String(), fmt.Sprint(map[string][3]int64{"/root/part_1": {200, 80, 10}, "/root/part_2": {100, 40, 5}}); got != want {
		t.Errorf("at the end: spend per sub-agent %s, want %s", got, want)
	}
}

// A session whose id tells no start (not a UUIDv7) is looked for in every
// folder, once, at the end; a call whose Codex named no thread has none.
func TestSubAgentFollowerWithNoStartLooksEverywhereAtTheEnd(t *testing.T) {
	sessions := t.TempDir()
	day := filepath.Join(sessions, "2025", "01", "02")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(day, "rollout-x-kid.jsonl"), []byte(rolloutLines("kid", "root-thread", spawnSource("root-thread", ""), 2)), 0o600); err != nil {
		t.Fatal(err)
	}
	var spend spendOf
	spend.got = map[string][3]int64{}
	f := newSubAgentFollower(sessions, "", func() string { return "root-thread" }, spend.report)
	f.poll(false)
	if got := spend.String(); got != "map[]" {
		t.Errorf("while running: %s, want nothing", got)
	}
	f.finish()
	if got, want := spend.String(), fmt.Sprint(map[string][3]int64{"thread kid": {200, 80, 10}}); got != want {
		t.Errorf("at the end: %s, want %s", got, want)
	}
	none := newSubAgentFollower(sessions, "", func() string { return "" }, func(ev budget.UsageEvent) { t.Errorf("booked %+v with no thread", ev) })
	none.finish()
}

// threadStart reads a UUIDv7's milliseconds, and refuses any other id.
func TestThreadStart(t *testing.T) {
	got, ok := threadStart("01a216aa-2046-7c02-8791-c81c29ddc76c")
	want := time.UnixMilli(0x01a216aa2046).Add(-time.Second)
	if !ok || !got.Equal(want) {
		t.Errorf("threadStart = %v %v, want %v", got, ok, want)
	}
	for _, id := range []string{"", "thread-1", "01a216aa-2046-4c02-8791-c81c29ddc76c", "zz"} {
		if _, ok := threadStart(id); ok {
			t.Errorf("threadStart(%q) read a time", id)
		}
	}
}
