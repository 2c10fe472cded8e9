package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
)

// wireReq is one model request an agent sends through the door, and the
// reply the provider would give it (before the door's bound).
type wireReq struct {
	model         string
	input, maxOut int64
	cacheRead     int64 // of input, read from the provider's cache
	output        int64 // the reply's output, cut at the granted bound
	parallel      bool  // sent alongside the next ones, not after the last
	// dribble keeps the reply streaming for up to this long, 10 tokens of
	// output every 5 ms, until the call is cut.
	dribble time.Duration
	after   time.Duration // sent this long after the ones before it
}

// door is a backend whose agent sends scripted requests through Purser's
// door as the gateway does: each admitted (CallHooks.Admit) before it is
// forwarded, its reply's usage reported through the UsageFunc at the
// granted model and bound, priced with the mock's cache accounting, then
// released. The first call's requests fix the task.
type door struct {
	workspace string
	reqs      []wireReq
	prices    *pricing.Catalogue

	mu      sync.Mutex
	grants  []purser.WireGrant
	refused []error
	billed  budget.USD // what the mock provider billed, cache included
	noAdmit bool       // the door without per-request admission (as before)

	admitted chan struct{} // told of each request admitted, when set
	cutAt    time.Time     // when a dribbling reply was cut by the call's end
}

func (d *door) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	if req.Hooks.Admit == nil && !d.noAdmit {
		return purser.CallResult{}, errors.New("the engine set no CallHooks.Admit")
	}
	var wg sync.WaitGroup
	var stop error
	var stopMu sync.Mutex
	send := func(r wireReq) {
		time.Sleep(r.after)
		grant := purser.WireGrant{Model: r.model, Release: func() {}}
		if !d.noAdmit {
			var err error
			grant, err = req.Hooks.Admit.AdmitWire(ctx, purser.WireRequest{Protocol: "anthropic", Model: r.model, InputTokens: r.input, MaxOutputTokens: r.maxOut, Stream: true})
			if err != nil {
				d.mu.Lock()
				d.refused = append(d.refused, err)
				d.mu.Unlock()
				stopMu.Lock()
				stop = err
				stopMu.Unlock()
				return
			}
		}
		defer grant.Release()
		d.mu.Lock()
		d.grants = append(d.grants, grant)
		d.mu.Unlock()
		if d.admitted != nil {
			d.admitted <- struct{}{}
		}
		if grant.WrapUp != "" {
			// The door sent the tool-free wrap-up request instead.
			grant.WrapUpDone("Done: the parser accepts trailing commas.\nRemains: the docs.")
		}
		if r.dribble > 0 {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			end := time.After(r.dribble)
			for {
				select {
				case <-ctx.Done():
					d.mu.Lock()
					d.cutAt = time.Now()
					d.mu.Unlock()
					return
				case <-end:
					return
				case <-tick.C:
					report(budget.UsageEvent{Model: grant.Model, OutputTokens: 10, CostSource: budget.CostUnknown})
				}
			}
		}
		out := r.output
		if grant.MaxOutputTokens > 0 {
			out = min(out, grant.MaxOutputTokens)
		}
		cacheRead := r.cacheRead
		if grant.Model != r.model {
			// Another model has none of this prefix cached: it writes it.
			cacheRead = 0
		}
		ev := d.prices.Estimate(budget.UsageEvent{Model: grant.Model, InputTokens: r.input, CacheReadTokens: cacheRead, CacheWriteTokens: r.cacheRead - cacheRead, OutputTokens: out})
		d.mu.Lock()
		d.billed = d.billed.Plus(ev.USD)
		d.mu.Unlock()
		// Booked even when the call was cut meanwhile, as the door reads a
		// reply to its end.
		report(ev)
	}
	for i := 0; i < len(d.reqs); i++ {
		stopMu.Lock()
		s := stop
		stopMu.Unlock()
		if s != nil || ctx.Err() != nil {
			break
		}
		if d.reqs[i].parallel {
			wg.Add(1)
			go func(r wireReq) { defer wg.Done(); send(r) }(d.reqs[i])
			continue
		}
		wg.Wait()
		send(d.reqs[i])
	}
	wg.Wait()
	if ctx.Err() != nil {
		return purser.CallResult{}, context.Cause(ctx)
	}
	if stop != nil {
		return purser.CallResult{}, stop
	}
	if err := os.WriteFile(filepath.Join(d.workspace, "src/fixed"), []byte("yes"), 0o644); err != nil {
		return purser.CallResult{}, err
	}
	if ctx.Err() != nil {
		return purser.CallResult{}, context.Cause(ctx)
	}
	if stop != nil {
		return purser.CallResult{}, stop
	}
	return purser.CallResult{Text: "done"}, nil
}

func (d *door) ReportsUSD(string) bool { return true }

const (
	sonnet = "claude-sonnet-4-5"
	haiku  = "claude-haiku-4-5"
)

// doorFixture is a task whose one backend is d, on Claude's priced models.
func doorFixture(t *testing.T, d *door, cfg budget.Config) *fixture {
	t.Helper()
	f := newFixture(t, "steps: []\n")
	d.workspace, d.prices = f.workspace, pricing.Builtin()
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return d, nil }
	f.task.Backend.Models = map[string]string{"cheap": haiku, "standard": sonnet}
	f.task.Budget = cfg
	return f
}

// repeat is n copies of r.
func repeat(n int, r wireReq) []wireReq {
	out := make([]wireReq, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// Spec: Task hits hard cap — at the door. Every request of the agent is
// admitted for its worst case before it is forwarded: the one that would
// cross the cap is first clamped, then refused in the words the agent
// reads ("purser: budget exhausted (hard usd $1.00)"), wrapping the cap;
// the task is BLOCKED and the bill never passes the cap, with requests one
// after another or all at once. The door without per-request admission
// (the call admitted as a whole, as before) goes over.
func TestTaskHitsHardCapAtTheDoor(t *testing.T) {
	// Each request: $0.15 of input, up to $0.15 of output ($0.30 worst),
	// $0.12 of it used: after three, $0.19 is left, for a fourth clamped to
	// about 2,600 tokens of output; nothing is left for a fifth.
	r := wireReq{model: sonnet, input: 50_000, maxOut: 10_000, output: 8_000}
	par := r
	par.parallel = true
	for _, tc := range []struct {
		name      string
		reqs      []wireReq
		noAdmit   bool
		wantOver  bool
		wantClamp bool
		anyClamp  bool // requests at once may or may not be clamped
	}{
		{"one after another: the fourth clamped, the fifth refused", repeat(8, r), false, false, true, false},
		{"eight at once", repeat(8, par), false, false, false, true},
		{"without admission at the door the bill passes the cap", repeat(8, r), true, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := &door{reqs: tc.reqs, noAdmit: tc.noAdmit}
			f := doorFixture(t, d, budget.Config{Hard: budget.HardLimits{USD: usd("1.00"), MaxIterations: ptr(5)}})
			f.task.Degrade = purser.DegradePolicy{}
			err := f.run()
			if tc.wantOver {
				if d.billed <= *usd("1.00") {
					t.Fatalf("billed %s without admission at the door: the test no longer shows an overshoot", d.billed)
				}
				return
			}
			if d.billed > *usd("1.00") {
				calls, _ := f.store.Calls(context.Background(), f.task.ID)
				for _, c := range calls {
					t.Logf("call %s attempt %d outcome %s reserved %v err %s", c.ID, c.Attempt, c.Outcome, c.Reserved, c.Error)
				}
				for _, g := range d.grants {
					t.Logf("grant max %d %q", g.MaxOutputTokens, g.Actions)
				}
				t.Logf("refused %v", d.refused)
				t.Fatalf("billed %s, past the $1.00 hard cap", d.billed)
			}
			if rec := f.state(); rec.State != purser.StateBlocked {
				t.Fatalf("state %s (%v), want BLOCKED", rec.State, err)
			}
			if len(d.refused) == 0 {
				t.Fatalf("no request refused; grants %+v", d.grants)
			}
			var be *budget.BudgetExhaustedError
			ref := d.refused[0]
			if !errors.As(ref, &be) || ref.Error() != "purser: budget exhausted (hard usd $1.00)" {
				t.Fatalf("refusal %q (%T), want \"purser: budget exhausted (hard usd $1.00)\" wrapping a *budget.BudgetExhaustedError", ref, ref)
			}
			clamped := false
			for _, g := range d.grants {
				if g.MaxOutputTokens > 0 && g.MaxOutputTokens < r.maxOut {
					clamped = true
				}
			}
			if clamped != tc.wantClamp && !tc.anyClamp {
				t.Fatalf("a grant clamped: %t, want %t (grants %+v)", clamped, tc.wantClamp, d.grants)
			}
			if tc.wantClamp && len(d.grants) != 4 {
				t.Fatalf("%d requests admitted, want 4 (3 whole, 1 clamped)", len(d.grants))
			}
			spent, err := f.store.UsageTotals(context.Background(), f.task.ID)
			must(t, err)
			if spent.USD != d.billed {
				t.Fatalf("the ledger holds %s, the provider billed %s", spent.USD, d.billed)
			}
		})
	}
}

// Spec: Task within optimal range — a call's one request whose worst case
// all but fills the budget is admitted whole: it borrows the call's own
// hold rather than being held on top of it (which would have clamped it).
func TestTaskWithinOptimalRangeRequestBorrowsTheCallsHold(t *testing.T) {
	// $0.285 of input, up to $0.60 of output: $0.885 of the $1.00 cap, with
	// the call's own hold (~$0.12) more than the $0.115 left beside it.
	r := wireReq{model: sonnet, input: 95_000, maxOut: 40_000, output: 1_000}
	small := wireReq{model: sonnet, input: 1_000, maxOut: 1_000, output: 100}
	d := &door{reqs: []wireReq{r, small}}
	f := doorFixture(t, d, budget.Config{Hard: budget.HardLimits{USD: usd("1.00"), MaxIterations: ptr(5)}})
	f.task.Degrade = purser.DegradePolicy{}
	if err := f.run(); err != nil {
		t.Fatal(err)
	}
	if len(d.grants) != 2 {
		t.Fatalf("%d grants, want 2", len(d.grants))
	}
	for i, g := range d.grants {
		if g.MaxOutputTokens != 0 || len(g.Actions) != 0 {
			t.Fatalf("request %d: granted max output %d with %q, want the request's own, unchanged", i+1, g.MaxOutputTokens, g.Actions)
		}
	}
}

// Spec: Task enters warning range — degrade at the wire, judged on the
// billed bill, cache included. In WARNING, switch_tier_cheap moves a
// request to the cheap model when that lowers its bill (no cache to lose)
// and keeps it when the cache it would lose costs more than the switch
// saves, saying why either way (the grant, the degrade record);
// shrink_context does not clamp the output bound: the agent continues a
// cut reply by a request reading the prompt again, and the rest of the
// reply is produced all the same. Each action taken lowers the mock's bill
// for the request; each one not taken would have raised it.
func TestTaskEntersWarningRangeDegradesAtTheWire(t *testing.T) {
	warm := wireReq{model: sonnet, input: 100_000, cacheRead: 95_000, maxOut: 4_000, output: 4_000}
	cold := wireReq{model: sonnet, input: 20_000, maxOut: 4_000, output: 4_000}
	big := wireReq{model: sonnet, input: 20_000, maxOut: 32_000, output: 32_000}
	prices := pricing.Builtin()
	bill := func(model string, r wireReq, cacheRead, out int64) budget.USD {
		return prices.Estimate(budget.UsageEvent{Model: model, InputTokens: r.input, CacheReadTokens: cacheRead, CacheWriteTokens: r.cacheRead - cacheRead, OutputTokens: out}).USD
	}
	for _, tc := range []struct {
		name       string
		actions    []purser.DegradeStep
		second     wireReq
		wantModel  string
		wantMaxOut int64
		wantSaid   string
		cheaper    func(r wireReq) bool // the decision lowered (or kept from raising) the bill
	}{
		{"no cache to lose: switched", []purser.DegradeStep{{Action: purser.SwitchTierCheap}}, cold, haiku, 0, "switch_tier_cheap: model claude-sonnet-4-5 → claude-haiku-4-5: no prompt cache to lose",
			func(r wireReq) bool { return bill(haiku, r, 0, r.output) < bill(sonnet, r, r.cacheRead, r.output) }},
		{"a warm cache worth more than the switch: kept", []purser.DegradeStep{{Action: purser.SwitchTierCheap}}, warm, sonnet, 0, "switch_tier_cheap: not taken: model claude-sonnet-4-5 → claude-haiku-4-5 loses 95000 cached tokens",
			func(r wireReq) bool { return bill(sonnet, r, r.cacheRead, r.output) < bill(haiku, r, 0, r.output) }},
		// A reply cut at 8,192 is continued by a request reading the prompt
		// and the cut reply again for the rest (degradebill_test.go
		// measures it on the cache mock).
		{"a large output bound: not clamped", []purser.DegradeStep{{Action: purser.ShrinkContext}}, big, sonnet, 0, "shrink_context: not taken: max output 32000 → 8192",
			func(r wireReq) bool {
				rest := wireReq{input: r.input + 8192, cacheRead: r.input}
				return bill(sonnet, r, 0, r.output) < bill(sonnet, r, 0, 8192)+bill(sonnet, rest, r.input, r.output-8192)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			first := tc.second
			first.output = 1000
			d := &door{reqs: []wireReq{first, tc.second}}
			// The first request's spend puts the task in WARNING.
			f := doorFixture(t, d, budget.Config{Optimal: budget.Limits{USD: usd("0.01")}, Hard: budget.HardLimits{USD: usd("5.00"), MaxIterations: ptr(5)}})
			f.task.Degrade = purser.DegradePolicy{Steps: tc.actions, Shrink: purser.ShrinkPolicy{Strategy: "failing_first", MaxTokens: 12000}}
			if err := f.run(); err != nil {
				t.Fatal(err)
			}
			if len(d.grants) != 2 {
				t.Fatalf("%d grants, want 2", len(d.grants))
			}
			if g := d.grants[0]; g.Model != sonnet || len(g.Actions) != 0 {
				t.Fatalf("first request, in OPTIMAL: model %s actions %q, want unchanged", g.Model, g.Actions)
			}
			g := d.grants[1]
			if g.Model != tc.wantModel || g.MaxOutputTokens != tc.wantMaxOut {
				t.Fatalf("second request, in WARNING: model %s max output %d, want %s %d (actions %q)", g.Model, g.MaxOutputTokens, tc.wantModel, tc.wantMaxOut, g.Actions)
			}
			if len(g.Actions) != 1 || !strings.HasPrefix(g.Actions[0], tc.wantSaid) {
				t.Fatalf("actions %q, want one starting %q", g.Actions, tc.wantSaid)
			}
			if !tc.cheaper(tc.second) {
				t.Fatalf("the decision does not lower the mock's bill")
			}
			ds, err := f.store.Degrades(context.Background(), f.task.ID)
			must(t, err)
			if len(ds) != 1 || !strings.Contains(ds[0].Detail, "at the wire: ") || ds[0].Action != tc.actions[0].Action {
				t.Fatalf("degrade records %+v, want the one decision at the wire", ds)
			}
		})
	}
}

// budgetHint: the grant carries a short note of what the budget has left,
// of the metrics configured only; without the option, none.
func TestBudgetHintAtTheDoor(t *testing.T) {
	r := wireReq{model: sonnet, input: 10_000, maxOut: 1_000, output: 1_000}
	for _, hint := range []bool{true, false} {
		d := &door{reqs: []wireReq{r}}
		f := doorFixture(t, d, budget.Config{Hard: budget.HardLimits{USD: usd("1.00"), MaxIterations: ptr(5)}})
		f.task.Degrade = purser.DegradePolicy{BudgetHint: hint}
		if err := f.run(); err != nil {
			t.Fatal(err)
		}
		got := d.grants[0].Hint
		if !hint {
			if got != "" {
				t.Fatalf("hint %q without budgetHint:", got)
			}
			continue
		}
		if !strings.Contains(got, "of $1.00") || !strings.Contains(got, "of 5 iterations") || strings.Contains(got, "tokens") {
			t.Fatalf("hint %q: want money and iterations left, and no tokens (not configured)", got)
		}
	}
}

// Spec: Task hits hard cap — a named budget's, at the door. A task whose
// run draws from a named budget has each request held there too: the one
// that would pass the budget's cap is refused naming it, and the budget's
// spend stays under its cap.
func TestNamedBudgetHardCapAtTheDoor(t *testing.T) {
	ctx := context.Background()
	d := &door{reqs: repeat(8, wireReq{model: sonnet, input: 5_000, maxOut: 2_000, output: 2_000})}
	f := doorFixture(t, d, budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(5)}})
	f.task.Degrade = purser.DegradePolicy{}
	f.cfg.Named = f.store
	f.task.DrawFrom = []string{"team"}
	capTokens := int64(30_000)
	must(t, f.store.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowMonth,
		Budget: budget.Config{Hard: budget.HardLimits{Tokens: &capTokens}}}))
	outcomes, err := f.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{f.task}, Parallel: 1})
	must(t, err)
	var ibe *budget.InsufficientBudgetError
	if !errors.As(outcomes[0].Err, &ibe) || ibe.Scope != budget.ScopeNamed || ibe.Name != "team" {
		t.Fatalf("outcome %v, want a stop by the named budget team", outcomes[0].Err)
	}
	if len(d.refused) != 1 || d.refused[0].Error() != `purser: budget exhausted (named "team" hard tokens 30000)` {
		t.Fatalf("refusals %v, want one naming the named budget's cap (%d grants, outcome %v)", d.refused, len(d.grants), outcomes[0].Err)
	}
	st, err := f.store.NamedBudgetStatus(ctx, "team", time.Now())
	must(t, err)
	if st.Spent.Tokens > capTokens || st.Spent.Tokens < 28_000 {
		t.Fatalf("team spent %d tokens, want at most its cap of %d (and the 4 requests that fit)", st.Spent.Tokens, capTokens)
	}
}

// The wrap-up turn (wrapUp:), a soft landing before the spec's HARD stop:
// once the WARNING line is passed, or when the request is the last of its
// size the budget admits, that request is the wrap-up (tool-free, its
// output bounded), once per task, and its reply is in STATUS.md when the
// task stops. The HARD stop still comes. Without the option, none.
func TestWrapUpTurnBeforeTheHardStop(t *testing.T) {
	r := wireReq{model: sonnet, input: 5_000, maxOut: 2_000, output: 2_000}
	for _, tc := range []struct {
		name      string
		wrapUp    bool
		budget    budget.Config
		wantAt    int // the request (1-based) that is the wrap-up; 0: none
		wantState purser.TaskState
	}{
		{"the WARNING line passed: the next request", true,
			budget.Config{Warning: budget.Limits{Tokens: ptr[int64](10_000)}, Hard: budget.HardLimits{Tokens: ptr[int64](100_000), MaxIterations: ptr(5)}}, 3, purser.StateDone},
		{"the next request would not fit: this one, then the hard stop", true,
			budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](16_000), MaxIterations: ptr(5)}}, 2, purser.StateBlocked},
		{"not asked for: none", false,
			budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](16_000), MaxIterations: ptr(5)}}, 0, purser.StateBlocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := &door{reqs: repeat(4, r)}
			f := doorFixture(t, d, tc.budget)
			f.task.Degrade = purser.DegradePolicy{WrapUp: tc.wrapUp}
			_ = f.run()
			if rec := f.state(); rec.State != tc.wantState {
				t.Fatalf("state %s (%s), want %s", rec.State, rec.Reason, tc.wantState)
			}
			at := 0
			for i, g := range d.grants {
				if g.WrapUp == "" {
					continue
				}
				if at != 0 {
					t.Fatalf("a second wrap-up turn at request %d", i+1)
				}
				at = i + 1
				if g.MaxOutputTokens > r.maxOut || g.WrapUpDone == nil {
					t.Fatalf("wrap-up grant %+v: want its output bounded and a WrapUpDone", g)
				}
			}
			if at != tc.wantAt {
				t.Fatalf("wrap-up at request %d, want %d (%d grants)", at, tc.wantAt, len(d.grants))
			}
			status := readFile(t, filepath.Join(f.workspace, "STATUS.md"))
			has := strings.Contains(status, "> Done: the parser accepts trailing commas.\n> Remains: the docs.")
			if has != (tc.wantAt != 0) {
				t.Fatalf("STATUS.md has the wrap-up: %t, want %t:\n%s", has, tc.wantAt != 0, status)
			}
		})
	}
}

// onHard: finish-call at the door: a request that does not fit is refused,
// naming the cap, but the reply in flight beside it is let end (it is not
// cut); with the default (cut), it is cut. Either way the task stops
// BLOCKED and the bill stays under the cap.
func TestTaskBlockedOnHardCapFinishCallAtTheDoor(t *testing.T) {
	long := wireReq{model: sonnet, input: 1_000, maxOut: 1_000, output: 100, dribble: 2 * time.Second, parallel: true}
	big := wireReq{model: sonnet, input: 50_000, maxOut: 10_000, output: 8_000, parallel: true, after: 100 * time.Millisecond}
	for _, tc := range []struct {
		onHard  budget.OnHard
		wantCut bool
	}{{budget.OnHardCut, true}, {budget.OnHardFinishCall, false}} {
		t.Run(string(tc.onHard), func(t *testing.T) {
			t.Parallel()
			d := &door{reqs: append([]wireReq{long}, repeat(6, big)...)}
			f := doorFixture(t, d, budget.Config{Hard: budget.HardLimits{USD: usd("1.00"), MaxIterations: ptr(5)}, OnHard: tc.onHard})
			f.task.Degrade = purser.DegradePolicy{}
			_ = f.run()
			if rec := f.state(); rec.State != purser.StateBlocked {
				t.Fatalf("state %s (%s), want BLOCKED", rec.State, rec.Reason)
			}
			if len(d.refused) == 0 {
				t.Fatal("no request refused")
			}
			d.mu.Lock()
			cut := !d.cutAt.IsZero()
			d.mu.Unlock()
			if cut != tc.wantCut {
				t.Fatalf("the reply in flight cut: %t, want %t", cut, tc.wantCut)
			}
			if d.billed > *usd("1.00") {
				t.Fatalf("billed %s, past the $1.00 hard cap", d.billed)
			}
		})
	}
}
