package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/gateway"
)

// responsesProvider is an OpenAI Responses upstream: each reply streams
// one text message and reports 100 input and 5 output tokens.
func responsesProvider(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n")
		fmt.Fprint(w, "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\"}]}}\n\n")
		fmt.Fprint(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":100,\"output_tokens\":5}}}\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// codexHeaders are the headers codex-cli 0.169.0 sends with a request of
// thread (its session, the main thread, is root): a spawned thread's carry
// its parent, x-openai-subagent (kind) and its task path (agent).
func codexHeaders(token, root, thread, parent, kind, agent string) map[string]string {
	meta, _ := json.Marshal(map[string]string{"session_id": root, "thread_id": thread, "agent_name": agent, "parent_thread_id": parent})
	h := map[string]string{"authorization": "Bearer " + token, "content-type": "application/json",
		"session-id": root, "thread-id": thread, "x-codex-turn-metadata": string(meta)}
	if parent != "" {
		h["x-codex-parent-thread-id"] = parent
	}
	if kind != "" {
		h["x-openai-subagent"] = kind
	}
	return h
}

// codexBody is a Responses request body as Codex sends one, in short.
const codexBody = `{"model":"gpt-5.5","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`

// Codex's sub-agents are threads, and each request names its thread in
// its headers (recorded from the real Codex 0.169.0 with multi_agent_v2):
// the door numbers the spawned threads in the order they first come,
// names each by its task path, and tells every later request of a thread
// as that sub-agent's. The main thread's requests, a thread of Codex's own
// machinery (a review), and a request that names no thread are the main
// agent's. Each grant's Used and the lane's booking are per sub-agent.
func TestDoorTellsWhichCodexThreadSentEachRequest(t *testing.T) {
	up := responsesProvider(t)
	adm := &whoAdmitter{used: map[int]int64{}}
	var mu sync.Mutex
	booked := map[string]int64{}
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.OpenAIResponses, Upstream: up.URL, Admit: adm,
		Report: func(ev budget.UsageEvent) { mu.Lock(); booked[ev.Agent] += ev.Tokens(); mu.Unlock() }})
	const root, a, b, c = "01a216aa-2046-7c02", "01a216aa-20e1-7a60", "01a216aa-20e2-7b00", "01a216aa-30e1-7000"
	steps := []struct {
		hdr      map[string]string
		want     int
		wantName string
	}{
		{codexHeaders(l.Token(), root, root, "", "", "/root"), 0, ""},
		{codexHeaders(l.Token(), root, b, root, "collab_spawn", "/root/part_2"), 1, "/root/part_2"},
		{codexHeaders(l.Token(), root, a, root, "collab_spawn", "/root/part_1"), 2, "/root/part_1"},
		{codexHeaders(l.Token(), root, b, root, "collab_spawn", "/root/part_2"), 1, "/root/part_2"},
		{codexHeaders(l.Token(), root, root, "", "", "/root"), 0, ""},
		{codexHeaders(l.Token(), root, c, root, "review", "/root"), 0, ""},
		{map[string]string{"authorization": "Bearer " + l.Token(), "content-type": "application/json"}, 0, ""},
		// A sub-agent's own sub-agent: a thread of its own, named by its path.
		{codexHeaders(l.Token(), root, c+"1", a, "collab_spawn", ""), 3, "thread " + c + "1"},
	}
	for i, s := range steps {
		if code, body := do(t, "POST", l.URL()+"/v1/responses", s.hdr, codexBody); code != 200 {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
		if got, name := adm.who[i], adm.names[i]; got != s.want || name != s.wantName {
			t.Errorf("request %d: sub-agent %d %q, want %d %q", i, got, name, s.want, s.wantName)
		}
	}
	want := map[int]int64{0: 4 * 105, 1: 2 * 105, 2: 105, 3: 105}
	for k, v := range want {
		if adm.used[k] != v {
			t.Errorf("Used: sub-agent %d spent %d tokens, want %d (%v)", k, adm.used[k], v, adm.used)
		}
	}
	l.Close()
	mu.Lock()
	defer mu.Unlock()
	wantBooked := map[string]int64{"": 4 * 105, "/root/part_2": 2 * 105, "/root/part_1": 105, "thread " + c + "1": 105}
	if fmt.Sprint(booked) != fmt.Sprint(wantBooked) {
		t.Errorf("booked per agent %v, want %v", booked, wantBooked)
	}
}

// A Codex sub-agent's request the engine refuses reaches Codex in
// OpenAI's error shape (402 insufficient_quota, which Codex does not
// retry with Purser's settings) with the engine's words as they are:
// Codex fails the sub-agent's turn and hands that message to the parent
// as the sub-agent's final answer ("Agent errored: unexpected status 402
// Payment Required: purser: sub-agent limit: …").
func TestDoorPassesACodexSubAgentRefusalAsItIs(t *testing.T) {
	up := responsesProvider(t)
	msg := "purser: sub-agent limit: 1 of maxSpawn 1 already spawned"
	adm := &whoAdmitter{used: map[int]int64{}, refuse: func(r purser.WireRequest) error {
		if r.SubAgent == 2 {
			return errors.New(msg)
		}
		return nil
	}}
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.OpenAIResponses, Upstream: up.URL, Admit: adm})
	const root = "root-thread"
	for _, th := range []string{root, "child-1"} {
		parent, kind := root, "collab_spawn"
		if th == root {
			parent, kind = "", ""
		}
		if code, body := do(t, "POST", l.URL()+"/v1/responses", codexHeaders(l.Token(), root, th, parent, kind, "/root/"+th), codexBody); code != 200 {
			t.Fatalf("%s: %d %s", th, code, body)
		}
	}
	code, body := do(t, "POST", l.URL()+"/v1/responses", codexHeaders(l.Token(), root, "child-2", root, "collab_spawn", "/root/two"), codexBody)
	if code != http.StatusPaymentRequired {
		t.Fatalf("spawn 2: %d %s, want 402", code, body)
	}
	var e struct {
		Error struct{ Type, Message, Code string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Type != "insufficient_quota" || e.Error.Message != msg {
		t.Errorf("refusal body %s (%v), want insufficient_quota %q", body, err, msg)
	}
}
