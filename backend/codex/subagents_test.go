package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
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

// A call's sub-agents are booked from their own rollouts: each spawned
// thread of the call's session, under its task path, with its last running
// total. The main thread's rollout (the stream's and its follower's), a
// review thread of the session, a sub-agent of another session, and a
// rollout last written before the session began are not read.
func TestSubAgentSpendReadsTheSpawnedThreadsRollouts(t *testing.T) {
	const root = "01a216aa-2046-7c02-8791-c81c29ddc76c"
	sessions := t.TempDir()
	day := filepath.Join(sessions, "2026", "11", "26")
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
	write(root, rolloutLines(root, root, `"exec"`, 3))
	write("01a216aa-20e1-7a60-9381-2426c7c16747", rolloutLines("01a216aa-20e1-7a60-9381-2426c7c16747", root, spawnSource(root, "/root/part_1"), 2))
	write("01a216aa-20e2-7a60-9381-2426c7c16747", rolloutLines("01a216aa-20e2-7a60-9381-2426c7c16747", root, spawnSource(root, "/root/part_2"), 1))
	write("01a216aa-20e3-7a60-9381-2426c7c16747", rolloutLines("01a216aa-20e3-7a60-9381-2426c7c16747", root, `{"subagent":"review"}`, 4))
	write("01a216aa-20e4-7a60-9381-2426c7c16747", rolloutLines("01a216aa-20e4-7a60-9381-2426c7c16747", "01a216aa-0000-7000-8000-000000000000", spawnSource("01a216aa-0000-7000-8000-000000000000", "/root/other"), 4))
	old := write("01a216aa-20e5-7a60-9381-2426c7c16747", rolloutLines("01a216aa-20e5-7a60-9381-2426c7c16747", root, spawnSource(root, "/root/old"), 4))
	begun, ok := threadStart(root)
	if !ok || begun.Year() != 2026 {
		t.Fatalf("threadStart(%s) = %v %v, want a time in 2026", root, begun, ok)
	}
	if err := os.Chtimes(old, begun.Add(-time.Hour), begun.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := map[string][3]int64{}
	for _, ev := range subAgentSpend(sessions, root, "") {
		g := got[ev.Agent]
		got[ev.Agent] = [3]int64{g[0] + ev.InputTokens, g[1] + ev.CacheReadTokens, g[2] + ev.OutputTokens}
		if ev.Model != "gpt-5.5" {
			t.Errorf("%s: model %q, want the rollout's gpt-5.5", ev.Agent, ev.Model)
		}
	}
	want := map[string][3]int64{"/root/part_1": {200, 80, 10}, "/root/part_2": {100, 40, 5}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("spend per sub-agent %v, want %v", got, want)
	}
	if evs := subAgentSpend(sessions, "", ""); evs != nil {
		t.Errorf("no thread named: %v, want nothing", evs)
	}
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
