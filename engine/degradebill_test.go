package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/gateway"
)

// Issue 21: every degrade action is judged on the billed cost, cache
// included. These tests run a conversation twice (or more) against a
// provider with a real prompt cache (backendtest.CacheMock), through a
// lane of Purser's door with the engine's admitter — with and without the
// action — and compare what the provider billed.

// convo is an agent's conversation in one call: a system prompt it marks
// for caching, then user turns, each asking for a reply of some length.
type convo struct {
	system    int64 // the system prompt's tokens (cache_control on it)
	user      int64 // each user turn's tokens
	replies   []int64
	maxTokens int64 // the max_tokens the agent asks for
	// force, when set, is the model the agent itself names from this
	// request on (0-based): an action forced, whatever the engine decides.
	force     string
	forceFrom int
	// continues: the agent continues a reply cut at max_tokens with a
	// "continue" turn, as agents do; otherwise it takes the cut reply.
	continues bool
	// prompt: the conversation opens with the call's prompt (the one Purser
	// builds) as its first user turn, as a CLI agent's does.
	prompt bool
	// fixAt is the iteration whose call fixes the workspace (0: the first);
	// failAttempt fails a call's first attempt, transiently, after its
	// first request, in iterations from this one on (0: never).
	fixAt, failAttempt int
}

// laneAgent is a backend whose agent talks Anthropic Messages, streaming,
// through a lane of the door (gateway.Open, with the engine's admitter and
// usage report) to a CacheMock, marking cache breakpoints as Claude Code
// does: on its system prompt and on its last message.
type laneAgent struct {
	workspace, upstream string
	c                   convo
	requests            int
}

func (a *laneAgent) ReportsUSD(string) bool { return true }

func (a *laneAgent) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	l, err := gateway.Open(ctx, gateway.LaneConfig{Task: req.TaskID, Protocol: gateway.Anthropic, Upstream: a.upstream,
		Model: req.Model, Report: report, Admit: req.Hooks.Admit})
	if err != nil {
		return purser.CallResult{}, err
	}
	defer l.Close()
	var history []map[string]any
	if a.c.prompt {
		history = append(history, map[string]any{"role": "user", "content": req.Prompt}, map[string]any{"role": "assistant", "content": "ok"})
	}
	for i, want := range a.c.replies {
		if i == 1 && a.c.failAttempt > 0 && req.Iteration >= a.c.failAttempt && req.Attempt == 1 {
			return purser.CallResult{}, fmt.Errorf("overloaded: %w", purser.ErrTransient)
		}
		user := fmt.Sprintf("turn %d: %s[reply %d]", i, words(a.c.user), want)
		for {
			text, cut, err := a.send(ctx, l.URL(), req.Model, history, user)
			if err != nil {
				return purser.CallResult{}, err
			}
			history = append(history, map[string]any{"role": "user", "content": user}, map[string]any{"role": "assistant", "content": text})
			got := int64(strings.Count(text, "tok "))
			if !cut || !a.c.continues {
				break
			}
			want -= got
			user = fmt.Sprintf("continue [reply %d]", want)
		}
	}
	if req.Kind == purser.CallMain && req.Iteration > a.c.fixAt {
		if err := os.WriteFile(filepath.Join(a.workspace, "src/fixed"), []byte("yes"), 0o644); err != nil {
			return purser.CallResult{}, err
		}
	}
	return purser.CallResult{Text: "done"}, nil
}

// send is one request: the history and a new user turn, the breakpoint on
// that turn; it returns the reply's text and whether max_tokens cut it.
func (a *laneAgent) send(ctx context.Context, url, model string, history []map[string]any, user string) (string, bool, error) {
	if a.c.force != "" && a.requests >= a.c.forceFrom {
		model = a.c.force
	}
	a.requests++
	msgs := append(append([]map[string]any(nil), history...), map[string]any{"role": "user",
		"content": []map[string]any{{"type": "text", "text": user, "cache_control": map[string]string{"type": "ephemeral"}}}})
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": a.c.maxTokens, "stream": true, "messages": msgs,
		"system": []map[string]any{{"type": "text", "text": words(a.c.system), "cache_control": map[string]string{"type": "ephemeral"}}}})
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return "", false, err
	}
	hr.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", false, fmt.Errorf("the door answered %s", resp.Status)
	}
	var text strings.Builder
	cut := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev struct {
			Delta struct {
				Text       string `json:"text"`
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil {
			text.WriteString(ev.Delta.Text)
			cut = cut || ev.Delta.StopReason == "max_tokens"
		}
	}
	return text.String(), cut, sc.Err()
}

func words(n int64) string { return strings.Repeat("tok ", int(n)) }

// billed runs c as one call of a task whose first request puts it in
// WARNING, under the degrade steps given, and returns the provider's mock
// with what it billed, and the task's degrade records.
func billed(t *testing.T, c convo, hint bool, steps ...purser.DegradeAction) (*backendtest.CacheMock, []purser.DegradeRecord) {
	t.Helper()
	return billedWith(t, c, func(f *fixture) { f.task.Degrade.BudgetHint = hint }, steps...)
}

// billedWith is billed with the task set up by setup first.
func billedWith(t *testing.T, c convo, setup func(f *fixture), steps ...purser.DegradeAction) (*backendtest.CacheMock, []purser.DegradeRecord) {
	t.Helper()
	mock := &backendtest.CacheMock{}
	a := &laneAgent{upstream: mock.Start(t), c: c}
	f := newFixture(t, "steps: []\n")
	a.workspace = f.workspace
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return a, nil }
	f.task.Backend.Models = map[string]string{"cheap": haiku, "standard": sonnet}
	f.task.Budget = budget.Config{Optimal: budget.Limits{USD: usd("0.001")}, Hard: budget.HardLimits{USD: usd("50.00"), MaxIterations: ptr(3)}}
	f.task.Degrade = purser.DegradePolicy{}
	setup(f)
	for _, s := range steps {
		f.task.Degrade.Steps = append(f.task.Degrade.Steps, purser.DegradeStep{Action: s})
	}
	if err := f.run(); err != nil {
		t.Fatal(err)
	}
	ds, err := f.store.Degrades(context.Background(), f.task.ID)
	must(t, err)
	return mock, ds
}

// turns is n user turns each asking for a reply of out tokens.
func turns(n int, out int64) []int64 {
	r := make([]int64, n)
	for i := range r {
		r[i] = out
	}
	return r
}

// firstOn is the index of the first request the mock billed on model (-1:
// none).
func firstOn(m *backendtest.CacheMock, model string) int {
	for i, r := range m.Requests() {
		if r.Model == model {
			return i
		}
	}
	return -1
}

// Issue 21, switch_tier_cheap at the wire, measured: with no cache to lose
// the switch is taken at the first request in WARNING and lowers the bill;
// after a big cached prefix it is declined, and forcing it right there
// raises the bill of a short conversation; a long conversation moves once
// staying has cost more than the move loses (ski rental), lowering the
// bill — judged one request at a time, as before, it never moved and paid
// 30 % more than moving at once. Each decision is recorded with why.
func TestDegradeSwitchTierCheapJudgedOnTheBill(t *testing.T) {
	t.Parallel()
	cold := convo{system: 500, user: 200, replies: turns(4, 300), maxTokens: 32000}
	warm := convo{system: 60000, user: 200, replies: turns(3, 300), maxTokens: 32000}
	long := warm
	long.replies = turns(12, 300)
	forced := func(c convo) budget.USD {
		c.force, c.forceFrom = haiku, 1
		m, _ := billed(t, c, false)
		return m.Bill().USD
	}
	for _, tc := range []struct {
		name    string
		c       convo
		movesAt int // the request the call moves to haiku at (-1: never)
		said    string
	}{
		{"no cache to lose", cold, 1, "model claude-sonnet-4-5 → claude-haiku-4-5: no prompt cache to lose"},
		{"a warm cache, a short conversation", warm, -1, "not taken: model claude-sonnet-4-5 → claude-haiku-4-5 loses 60218 cached tokens"},
		{"a warm cache, a long conversation", long, 5, "model claude-sonnet-4-5 → claude-haiku-4-5: loses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off, _ := billed(t, tc.c, false)
			on, ds := billed(t, tc.c, false, purser.SwitchTierCheap)
			if got := firstOn(on, haiku); got != tc.movesAt {
				t.Fatalf("moved to haiku at request %d, want %d (%v)", got, tc.movesAt, ds)
			}
			if len(ds) == 0 || !strings.Contains(ds[len(ds)-1].Detail, tc.said) {
				t.Fatalf("degrade records %v, want the last saying %q", ds, tc.said)
			}
			atOnce := forced(tc.c)
			t.Logf("billed: without %s, with %s, forced at the first request in WARNING %s", off.Bill().USD, on.Bill().USD, atOnce)
			if tc.movesAt < 0 {
				if on.Bill() != off.Bill() || atOnce <= off.Bill().USD {
					t.Fatalf("declined: billed %s (without %s); forcing billed %s, want more", on.Bill().USD, off.Bill().USD, atOnce)
				}
				return
			}
			if on.Bill().USD >= off.Bill().USD {
				t.Fatalf("taken: billed %s, not less than %s without", on.Bill().USD, off.Bill().USD)
			}
			if best := min(off.Bill().USD, atOnce); on.Bill().USD > 2*best {
				t.Fatalf("billed %s, more than twice the better of never and at once (%s)", on.Bill().USD, best)
			}
		})
	}
}

// Issue 21, shrink_context at the wire, measured: an agent continues a
// reply cut at max_tokens, so clamping the bound saves no output and reads
// the prompt again — forced, it raises the bill; the door does not take
// it, and says why. (An agent that took the cut reply as it is would pay
// less, for a reply cut short: the door cannot tell the two apart.)
func TestDegradeShrinkContextAtTheWireJudgedOnTheBill(t *testing.T) {
	t.Parallel()
	c := convo{system: 3000, user: 200, replies: []int64{300, 20000, 300}, maxTokens: 32000, continues: true}
	off, _ := billed(t, c, false)
	on, ds := billed(t, c, false, purser.ShrinkContext)
	c.maxTokens = 8192
	forced, _ := billed(t, c, false)
	t.Logf("billed: without %s, with %s, forced %s", off.Bill().USD, on.Bill().USD, forced.Bill().USD)
	if len(ds) != 1 || !strings.Contains(ds[0].Detail, "not taken: max output 32000 → 8192") {
		t.Fatalf("degrade records %v, want the clamp not taken, with why", ds)
	}
	if on.Bill() != off.Bill() || len(on.Requests()) != len(off.Requests()) {
		t.Fatalf("with the policy: %d requests billed %s; without: %d billed %s", len(on.Requests()), on.Bill().USD, len(off.Requests()), off.Bill().USD)
	}
	if forced.Bill().USD <= off.Bill().USD || len(forced.Requests()) <= len(off.Requests()) {
		t.Fatalf("the clamp forced: %d requests billed %s, want more than %s", len(forced.Requests()), forced.Bill().USD, off.Bill().USD)
	}
}

// Issue 21, budgetHint on the cache mock: the note of what remains is
// appended after the last cache breakpoint, so every request reads from
// the cache exactly the tokens it reads without the note (and the note
// reaches the provider: its input grows).
func TestBudgetHintKeepsCacheReadsOnTheMock(t *testing.T) {
	t.Parallel()
	c := convo{system: 3000, user: 200, replies: turns(4, 300), maxTokens: 32000}
	off, _ := billed(t, c, false)
	on, _ := billed(t, c, true)
	a, b := off.Requests(), on.Requests()
	if len(a) != len(b) || len(a) != 4 {
		t.Fatalf("%d requests with the note, %d without; want 4 each", len(b), len(a))
	}
	for i := range a {
		if b[i].CacheRead != a[i].CacheRead || b[i].Input <= a[i].Input {
			t.Fatalf("request %d: with the note %+v, without %+v: want the same cache reads and more input", i, b[i], a[i])
		}
	}
	if on.CacheReadTokens() == 0 {
		t.Fatal("no request read the cache")
	}
}

// bigWorkspace makes the file the task's issue names (src/parser.go, so in
// its prompt) about n tokens long, and the shrink policy's cap shrinkTo.
func bigWorkspace(n int64, shrinkTo int, selfReview bool) func(f *fixture) {
	return func(f *fixture) {
		write(f.t, filepath.Join(f.workspace, "src/parser.go"), "package src\n\n// "+strings.Repeat("lorem ipsum dolor sit amet consectetur\n// ", int(n/8))+"\nfunc Parse() {}\n")
		f.task.Degrade.Shrink = purser.ShrinkPolicy{Strategy: "failing_first", MaxTokens: shrinkTo}
		f.task.SelfReview = selfReview
	}
}

// Issue 21, the degrade of the prompts Purser builds, measured on the cache
// mock through the door, an agent opening its conversation with Purser's
// prompt after a 15k-token system prompt it caches, in a workspace whose
// named file makes that prompt 40k tokens: each action taken lowers the
// run's bill. A call's prompt begins with its iteration, so a shrink breaks
// no cache a later call could read — but a retry resends a prompt the
// provider has cached: there, shrinking 40k to 27k is declined, and forced
// it raised the bill.
func TestDegradeAtTheEngineJudgedOnTheBill(t *testing.T) {
	t.Parallel()
	next := convo{system: 15000, user: 200, replies: turns(3, 300), maxTokens: 32000, prompt: true, fixAt: 1}
	retry := next
	retry.failAttempt, retry.fixAt = 1, 0
	for _, tc := range []struct {
		name       string
		c          convo
		a          purser.DegradeAction
		shrinkTo   int
		selfReview bool
		taken      bool
		said       string
	}{
		{"shrink_context at the next iteration", next, purser.ShrinkContext, 4000, false, true, "context failing_first to"},
		{"shrink_context on a retry, 40k to 27k", retry, purser.ShrinkContext, 30000, false, false, "not taken: context failing_first to"},
		{"switch_tier_cheap at the next call", next, purser.SwitchTierCheap, 4000, false, true, "model tier standard → cheap"},
		{"disable_self_review", next, purser.DisableSelfReview, 4000, true, true, "self-review call skipped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup := bigWorkspace(40000, tc.shrinkTo, tc.selfReview)
			off, _ := billedWith(t, tc.c, setup)
			on, ds := billedWith(t, tc.c, setup, tc.a)
			said := false
			for _, d := range ds {
				said = said || (d.Action == tc.a && strings.HasPrefix(d.Detail, tc.said))
			}
			if !said {
				t.Fatalf("degrade records %v, want one of %s saying %q", ds, tc.a, tc.said)
			}
			t.Logf("billed: without %s, with %s", off.Bill().USD, on.Bill().USD)
			if tc.taken {
				if on.Bill().USD >= off.Bill().USD {
					t.Fatalf("taken: billed %s, not less than %s without", on.Bill().USD, off.Bill().USD)
				}
				return
			}
			forced, _ := billedWith(t, tc.c, func(f *fixture) {
				setup(f)
				t.Cleanup(engine.ForceRetryPromptChanges(f.workspace))
			}, tc.a)
			t.Logf("forced: %s", forced.Bill().USD)
			if on.Bill() != off.Bill() || forced.Bill().USD <= off.Bill().USD {
				t.Fatalf("declined: billed %s (without %s); forced %s, want more", on.Bill().USD, off.Bill().USD, forced.Bill().USD)
			}
		})
	}
}

// Issue 21, switch_tier_cheap at a call's start, measured: one-request calls
// after a 60k-token system prompt the agent caches. Moving at the second
// call, as the engine did unjudged, raised the bill of a 3-call task by
// 13 %: it is declined, at the call's start and at the door; a 14-call
// task moves once staying has cost what the move loses, and pays less than
// never moving.
func TestDegradeSwitchTierCheapAtTheEngineJudgedOnTheBill(t *testing.T) {
	t.Parallel()
	iterations := func(n int) func(f *fixture) {
		return func(f *fixture) { f.task.Budget.Hard.MaxIterations = ptr(n) }
	}
	short := convo{system: 60000, user: 200, replies: turns(1, 300), maxTokens: 32000, prompt: true, fixAt: 2}
	off, _ := billedWith(t, short, iterations(3))
	on, ds := billedWith(t, short, iterations(3), purser.SwitchTierCheap)
	forcedC := short
	forcedC.force, forcedC.forceFrom = haiku, 1
	forced, _ := billedWith(t, forcedC, iterations(3))
	t.Logf("3 calls: without %s, with %s, forced at the 2nd call %s", off.Bill().USD, on.Bill().USD, forced.Bill().USD)
	if firstOn(on, haiku) != -1 || on.Bill() != off.Bill() || forced.Bill().USD <= off.Bill().USD {
		t.Fatalf("3 calls: moved at request %d, billed %s (without %s, forced %s); want declined, forcing dearer (%v)",
			firstOn(on, haiku), on.Bill().USD, off.Bill().USD, forced.Bill().USD, ds)
	}
	if len(ds) == 0 || !strings.HasPrefix(ds[0].Detail, "not taken: model tier standard → cheap: loses") {
		t.Fatalf("degrade records %v, want the switch at the call's start not taken, with why", ds)
	}
	long := short
	long.fixAt = 13
	off, _ = billedWith(t, long, iterations(14))
	on, _ = billedWith(t, long, iterations(14), purser.SwitchTierCheap)
	t.Logf("14 calls: without %s, with %s (moved at call %d)", off.Bill().USD, on.Bill().USD, firstOn(on, haiku)+1)
	if at := firstOn(on, haiku); at < 2 || on.Bill().USD >= off.Bill().USD {
		t.Fatalf("14 calls: moved at request %d, billed %s, want a later move billing less than %s", at, on.Bill().USD, off.Bill().USD)
	}
}

// usageReads is a store that counts the reads of a task's whole ledger.
type usageReads struct {
	purser.Store
	n atomic.Int64
}

func (u *usageReads) Usage(ctx context.Context, taskID string) ([]purser.LedgerEntry, error) {
	u.n.Add(1)
	return u.Store.Usage(ctx, taskID)
}

// Judging the switch at each call's start and at the door reads the task's
// ledger once, then keeps it as the task reports its usage: a task in
// WARNING for many calls does not read its whole ledger per call (issue
// 24). The judgement is the one TestDegradeSwitchTierCheapAtTheEngineJudgedOnTheBill
// checks on the bill.
func TestSwitchJudgementReadsTheLedgerOnce(t *testing.T) {
	t.Parallel()
	reads := &usageReads{}
	long := convo{system: 60000, user: 200, replies: turns(1, 300), maxTokens: 32000, prompt: true, fixAt: 13}
	on, ds := billedWith(t, long, func(f *fixture) {
		f.task.Budget.Hard.MaxIterations = ptr(14)
		reads.Store = f.cfg.Store
		f.cfg.Store = reads
	}, purser.SwitchTierCheap)
	if firstOn(on, haiku) < 2 {
		t.Fatalf("the switch was taken at request %d (%v): want the judgement of the bill test", firstOn(on, haiku), ds)
	}
	if n := reads.n.Load(); n != 1 {
		t.Fatalf("the task's whole ledger was read %d times over 14 calls judged, want once", n)
	}
}
