package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// subReq is one request of a scripted agent with sub-agents: who sends it
// (0 the main agent, k the k-th spawn as the door tells), its input and
// output bound, and the output its reply has (cut at the granted bound).
type subReq struct {
	who           int
	input, maxOut int64
	output        int64
}

// subAgentDoor is a backend whose agent sends its requests through the
// door as Claude Code does with sub-agents: each admitted, a refusal
// handed back to the parent (which goes on, as Claude Code's Agent tool
// returns the error), an admitted reply's usage handed to the grant's Used
// and reported under the sub-agent's name, then released.
type subAgentDoor struct {
	workspace string
	reqs      []subReq
	prices    *pricing.Catalogue
	unfixed   bool // leave the workspace as it was: the validator fails

	mu      sync.Mutex
	refused map[int]string // per request index
	grants  map[int]purser.WireGrant
}

func (d *subAgentDoor) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	for i, r := range d.reqs {
		name := ""
		if r.who > 0 {
			name = "general-purpose: part " + string(rune('0'+r.who))
		}
		g, err := req.Hooks.Admit.AdmitWire(ctx, purser.WireRequest{Protocol: "anthropic", Model: sonnet, InputTokens: r.input,
			MaxOutputTokens: r.maxOut, Stream: true, SubAgent: r.who, SubAgentName: name})
		d.mu.Lock()
		if err != nil {
			d.refused[i] = err.Error()
			d.mu.Unlock()
			continue
		}
		d.grants[i] = g
		d.mu.Unlock()
		out := r.output
		if g.MaxOutputTokens > 0 {
			out = min(out, g.MaxOutputTokens)
		}
		ev := budget.UsageEvent{Model: sonnet, InputTokens: r.input, OutputTokens: out}
		if g.Used != nil {
			g.Used(ev)
		}
		ev.Agent = name
		report(ev)
		g.Release()
	}
	if d.unfixed {
		return purser.CallResult{Text: "not yet"}, nil
	}
	if err := os.WriteFile(filepath.Join(d.workspace, "src/fixed"), []byte("yes"), 0o644); err != nil {
		return purser.CallResult{}, err
	}
	return purser.CallResult{Text: "done"}, nil
}

func (d *subAgentDoor) ReportsUSD(string) bool { return true }

// Spec (issue 25): sub-agents as budget nodes. Three spawns under
// maxSpawn 2: the third's first request is refused ("sub-agent limit"), and
// its follow-up too; sub-agent 1 is stopped at its $0.05 cap (its second
// request needs more than the cap leaves), while the
// main agent's requests go on and the task is DONE. Nothing refused
// stops the call; the task's spend is every admitted request's, and no
// sub-agent spent past its cap.
func TestSubAgentCapsAtTheDoor(t *testing.T) {
	// Sonnet 4.5: $3 input, $15 output per million. 10,000 input = $0.03.
	r := func(who int, out int64) subReq { return subReq{who: who, input: 10_000, maxOut: 4_000, output: out} }
	d := &subAgentDoor{refused: map[int]string{}, grants: map[int]purser.WireGrant{}, reqs: []subReq{
		r(0, 500),  // 0: the main agent spawns
		r(1, 500),  // 1: sub-agent 1, $0.0375 spent
		r(2, 100),  // 2: sub-agent 2
		r(1, 4000), // 3: sub-agent 1 again: $0.0125 left, less than its input's $0.03: refused
		r(3, 100),  // 4: a third spawn: past maxSpawn 2
		r(3, 100),  // 5: its follow-up: refused the same
		r(0, 100),  // 6: the main agent goes on
	}}
	f := newFixture(t, "steps: []\n")
	d.workspace, d.prices = f.workspace, pricing.Builtin()
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return d, nil }
	f.task.Backend.Models = map[string]string{"cheap": haiku, "standard": sonnet}
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("5.00"), MaxIterations: ptr(3)}}
	f.task.Degrade = purser.DegradePolicy{}
	two := 2
	f.task.SubAgents = purser.SubAgentLimits{MaxSpawn: &two, Each: purser.SubAgentCap{USD: usd("0.05")}}
	if err := f.run(); err != nil {
		t.Fatalf("run: %v (refused %v)", err, d.refused)
	}
	if rec := f.state(); rec.State != purser.StateDone {
		t.Fatalf("state %s, want DONE", rec.State)
	}
	want := map[int]string{
		3: "purser: sub-agent 1 at its cap ($0.0375 of $0.05; its next request needs up to $0.03384)",
		4: "purser: sub-agent limit: 2 of maxSpawn 2 already spawned",
		5: "purser: sub-agent limit: 2 of maxSpawn 2 already spawned",
	}
	if len(d.refused) != len(want) {
		t.Errorf("refused %v, want %v", d.refused, want)
	}
	for i, msg := range want {
		if d.refused[i] != msg {
			t.Errorf("request %d refused %q, want %q", i, d.refused[i], msg)
		}
	}
	var told []string
	for _, ev := range f.events {
		if ev.Type == purser.EventWarning && strings.Contains(ev.Message, "sub-agent") {
			told = append(told, ev.Message)
		}
	}
	if len(told) != 2 || told[0] != "refused at the door, the agent goes on: "+want[3] || told[1] != "refused at the door, the agent goes on: "+want[4] {
		t.Errorf("the live view was told %q, want each refusal once", told)
	}
	for _, i := range []int{0, 2, 6} {
		if d.grants[i].Used != nil != (d.reqs[i].who > 0) {
			t.Errorf("request %d (who %d): Used set %t", i, d.reqs[i].who, d.grants[i].Used != nil)
		}
	}
	// Booked per sub-agent in the ledger, under the task.
	usage, err := f.store.CallUsage(context.Background(), f.task.ID)
	must(t, err)
	per := map[string]int64{}
	for _, u := range usage {
		per[u.Agent] += u.Totals.Tokens
	}
	if per[""] != 20_600 || per["general-purpose: part 1"] != 10_500 || per["general-purpose: part 2"] != 10_100 || len(per) != 3 {
		t.Errorf("ledger per agent %v", per)
	}
}

// A sub-agent's next request is clamped to what its own cap leaves, and
// refused once the cap leaves less than the least worthwhile request;
// with no subAgents: the same requests pass untouched.
func TestSubAgentClampedThenStoppedAtItsTokenCap(t *testing.T) {
	r := func(who int, out int64) subReq { return subReq{who: who, input: 1_000, maxOut: 4_000, output: out} }
	for _, capped := range []bool{true, false} {
		d := &subAgentDoor{refused: map[int]string{}, grants: map[int]purser.WireGrant{}, reqs: []subReq{r(0, 10), r(1, 4000), r(1, 4000), r(1, 10)}}
		f := newFixture(t, "steps: []\n")
		d.workspace, d.prices = f.workspace, pricing.Builtin()
		f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return d, nil }
		f.task.Backend.Models = map[string]string{"cheap": haiku, "standard": sonnet}
		f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("5.00"), MaxIterations: ptr(3)}}
		f.task.Degrade = purser.DegradePolicy{}
		if capped {
			tokens := int64(8_000)
			f.task.SubAgents = purser.SubAgentLimits{Each: purser.SubAgentCap{Tokens: &tokens}}
		}
		must(t, f.run())
		if !capped {
			if len(d.refused) != 0 || d.grants[2].MaxOutputTokens != 0 {
				t.Fatalf("uncapped: refused %v, grant 2 max %d", d.refused, d.grants[2].MaxOutputTokens)
			}
			continue
		}
		// 5,000 spent; the next: 1,000 in, 2,000 out fits the 8,000.
		if g := d.grants[2]; g.MaxOutputTokens != 2_000 || len(g.Actions) == 0 || !strings.Contains(g.Actions[len(g.Actions)-1], "sub-agent 1's cap") {
			t.Errorf("grant 2: max %d %q, want 2000 clamped by sub-agent 1's cap", g.MaxOutputTokens, g.Actions)
		}
		if got := d.refused[3]; got != "purser: sub-agent 1 at its cap (8000 of 8000 tokens)" {
			t.Errorf("request 3 refused %q", got)
		}
	}
}

// The task's caps bind a sub-agent's requests as the main agent's: a
// sub-agent well inside its own cap is refused at the task's hard cap, in
// the task's words, and the task stops BLOCKED.
func TestSubAgentStillBoundByTheTasksCap(t *testing.T) {
	r := func(who int) subReq { return subReq{who: who, input: 10_000, maxOut: 4_000, output: 500} }
	d := &subAgentDoor{refused: map[int]string{}, grants: map[int]purser.WireGrant{}, reqs: []subReq{r(0), r(1), r(1)}}
	f := newFixture(t, "steps: []\n")
	d.workspace, d.prices = f.workspace, pricing.Builtin()
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return d, nil }
	f.task.Backend.Models = map[string]string{"cheap": haiku, "standard": sonnet}
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("0.08"), MaxIterations: ptr(3)}}
	f.task.Degrade = purser.DegradePolicy{}
	f.task.SubAgents = purser.SubAgentLimits{Each: purser.SubAgentCap{USD: usd("1.00")}}
	_ = f.run()
	if rec := f.state(); rec.State != purser.StateBlocked {
		t.Fatalf("state %s, want BLOCKED", rec.State)
	}
	// $0.0375 each: two fit under $0.08, the third does not.
	if got := d.refused[2]; got != "purser: budget exhausted (hard usd $0.08)" {
		t.Errorf("the sub-agent's second request refused %q (refused %v)", got, d.refused)
	}
}

// maxSpawn counts the task's spawns across processes: a task resumed in a
// new process (its sub-agent book empty) counts the sub-agents its ledger
// shows spent, so a spawn that would be past the cap over the whole task
// is refused, not granted afresh.
func TestSubAgentSpawnsCountAcrossAResume(t *testing.T) {
	r := func(who int) subReq { return subReq{who: who, input: 1_000, maxOut: 1_000, output: 100} }
	f := newFixture(t, "steps: []\n")
	first := &subAgentDoor{refused: map[int]string{}, grants: map[int]purser.WireGrant{}, reqs: []subReq{r(0), r(1)}, unfixed: true}
	first.workspace, first.prices = f.workspace, pricing.Builtin()
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return first, nil }
	f.task.Backend.Models = map[string]string{"cheap": haiku, "standard": sonnet}
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("5.00"), MaxIterations: ptr(1)}}
	f.task.Degrade = purser.DegradePolicy{}
	one := 1
	f.task.SubAgents = purser.SubAgentLimits{MaxSpawn: &one}
	if err := f.run(); err == nil || len(first.refused) != 0 {
		t.Fatalf("first run: %v (refused %v), want stopped at its one iteration with nothing refused", err, first.refused)
	}
	// Resumed, as a new process would: a new engine, the sub-agent book empty.
	second := &subAgentDoor{refused: map[int]string{}, grants: map[int]purser.WireGrant{}, reqs: []subReq{r(0), r(1), r(0)}}
	second.workspace, second.prices = f.workspace, pricing.Builtin()
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return second, nil }
	f.eng = nil
	f.task.Budget.Hard.MaxIterations = ptr(3)
	if err := f.run(); err != nil {
		t.Fatalf("resumed run: %v (refused %v)", err, second.refused)
	}
	if want := "purser: sub-agent limit: 1 of maxSpawn 1 already spawned"; second.refused[1] != want || len(second.refused) != 1 {
		t.Errorf("resumed run refused %v, want request 1 (a second spawn over the task) refused %q", second.refused, want)
	}
}
