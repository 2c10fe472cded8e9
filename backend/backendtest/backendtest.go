// Package backendtest is the conformance suite every Purser backend runs,
// in the manner of litestream's RunWithReplicaClient: a backend's
// conformance_test.go gives Run a Harness that builds the backend with its
// agent or provider scripted, and the suite checks, through the
// purser.Backend interface alone, what the engine relies on: usage reported
// once per token, cancellation honoured promptly, no process left after a
// stop, hostile output turned into a clear error, the call's limits passed
// on, and secrets kept out of what the backend returns.
//
// The scripted agents are the test binary itself: the harness's TestMain
// calls Main with a Dialect that writes the agent's output format, and
// AgentCommand gives the command and environment that start it. Providers
// behind HTTP use ServeHTTP.
package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Capability is something a backend may be unable to do, for a reason the
// suite reports when it skips the subtests that need it.
type Capability string

// The capabilities a Harness may declare unsupported.
const (
	// OutputCap: the backend passes CallRequest.MaxOutputTokens on to its
	// provider or agent, which then outputs no more.
	OutputCap Capability = "MaxOutputTokens passed on"
	// USDFence: the backend passes CallRequest.MaxUSD on to an agent with
	// a spending fence of its own.
	USDFence Capability = "MaxUSD passed on"
	// ReportsUSD: the provider or agent reports what the usage cost.
	ReportsUSD Capability = "dollars reported"
	// AgentOutput: the harness can script the agent's output (hostile
	// output, secrets in it).
	AgentOutput Capability = "scripted agent output"
	// RejectsBadOutput: garbage or no output fails the call. A backend
	// whose protocol takes free text may succeed instead, saying in
	// CallResult.Note what was wrong.
	RejectsBadOutput Capability = "bad output fails the call"
	// ProcessGroup: the backend runs its agent as a process group.
	ProcessGroup Capability = "agent process group"
)

// Harness is what a backend gives the suite.
type Harness struct {
	// New returns the backend under test, its agent or provider scripted
	// to play s in the next call. It is called once per subtest.
	New func(t *testing.T, s Script) purser.Backend
	// Unsupported names the capabilities the backend does not have, each
	// with the reason why.
	Unsupported map[Capability]string
	// Replays are captured runs of the real agent, for its scripted agent
	// to replay: each must land whole.
	Replays []Replay
}

// Replay is a captured run of a real agent and the usage it reported.
type Replay struct {
	// File holds what the agent wrote to stdout; an absolute path.
	File string
	// Want is the run's usage as its own totals say (USD: the dollars it
	// reported, if it reports any).
	Want Usage
	// Failed: the run ended in failure, so the call must fail (its usage
	// still lands whole).
	Failed bool
}

// Bound is how long a backend may take to return once its call's context is
// done. It is generous on purpose: the point is that the call returns, not
// how fast.
const Bound = 10 * time.Second

// callLimit is how long a call that ends by itself may take, on a loaded
// machine, before the suite calls it hung.
const callLimit = 90 * time.Second

// Model is the model the suite asks for.
const Model = "conformance-model"

// secretEnv is an environment variable the suite plants a secret in for the
// secrets subtests: its value must never come back from a backend.
const secretEnv = "BACKENDTEST_PLANTED_TOKEN"

// The secrets planted: one known by its environment variable, one by its
// shape (an Anthropic key).
const (
	envSecret   = "planted-env-secret-4711"
	shapeSecret = "sk-ant-api03-conformanceSecret0123456789"
)

// Run runs the conformance suite against the backend h builds.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("backendtest: Harness.New is nil")
	}
	t.Run("usage", func(t *testing.T) { testUsage(t, h) })
	t.Run("cancel", func(t *testing.T) { testCancel(t, h) })
	t.Run("stop", func(t *testing.T) { testStop(t, h) })
	t.Run("hostile", func(t *testing.T) { testHostile(t, h) })
	t.Run("limits", func(t *testing.T) { testLimits(t, h) })
	t.Run("secrets", func(t *testing.T) { testSecrets(t, h) })
}

func (h Harness) require(t *testing.T, c Capability) {
	t.Helper()
	if why, ok := h.Unsupported[c]; ok {
		t.Skipf("%s: not supported: %s", c, why)
	}
}

func (h Harness) supports(c Capability) bool {
	_, ok := h.Unsupported[c]
	return !ok
}

// collector gathers a call's usage events, checks each, and notes any that
// come after Call returned.
type collector struct {
	mu       sync.Mutex
	events   []budget.UsageEvent
	invalid  []string
	late     int
	returned bool
	tokens   bool          // an event with tokens came
	first    chan struct{} // closed then
}

func newCollector() *collector { return &collector{first: make(chan struct{})} }

func (c *collector) report(ev budget.UsageEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.returned {
		c.late++
		return
	}
	if err := ev.Validate(); err != nil {
		c.invalid = append(c.invalid, err.Error())
	}
	if ev.Tokens() > 0 && !c.tokens {
		c.tokens = true
		close(c.first)
	}
	c.events = append(c.events, ev)
}

func (c *collector) callReturned() {
	c.mu.Lock()
	c.returned = true
	c.mu.Unlock()
}

// sum is the usage the backend reported.
func (c *collector) sum() Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	var u Usage
	for _, ev := range c.events {
		u = u.Plus(Usage{Input: ev.InputTokens, CacheRead: ev.CacheReadTokens, CacheWrite: ev.CacheWriteTokens, Output: ev.OutputTokens, USD: ev.USD})
	}
	return u
}

// check fails t for invalid events and for events reported after Call
// returned. It waits a little for late ones: a goroutine the backend left
// behind would report then.
func (c *collector) check(t *testing.T) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, msg := range c.invalid {
		t.Errorf("invalid usage event: %s", msg)
	}
	if c.late > 0 {
		t.Errorf("%d usage event(s) reported after Call returned: the engine has already closed the call's books", c.late)
	}
}

// call is one scripted call and what came of it.
type call struct {
	res       purser.CallResult
	err       error
	usage     *collector
	script    Script
	took      time.Duration // from the start of Call
	cancelled bool          // the suite cancelled the call mid-stream
	stopTook  time.Duration // from the cancel
}

// setup fills in the script's state directory and model and builds the
// backend.
func (h Harness) setup(t *testing.T, s Script) (purser.Backend, Script) {
	t.Helper()
	s.State = t.TempDir()
	if s.Model == "" {
		s.Model = Model
	}
	return h.New(t, s), s
}

func request(t *testing.T, s Script) purser.CallRequest {
	return purser.CallRequest{TaskID: "conformance", Kind: purser.CallMain, Iteration: 1, Attempt: 1, Model: s.Model,
		Prompt: "Fix the failing test in parser.go.", ContextTokens: 10, Workspace: t.TempDir()}
}

// do runs the call: with cancelAtFirstUsage, ctx is cancelled once usage
// was reported or told mid-stream. A call that does not return in time
// fails the test (its goroutine is left behind).
func (h Harness) do(t *testing.T, s Script, ctx context.Context, edit func(*purser.CallRequest), cancelAtFirstUsage bool) call {
	t.Helper()
	b, s := h.setup(t, s)
	req := request(t, s)
	if edit != nil {
		edit(&req)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := call{usage: newCollector(), script: s}
	cancelled := make(chan time.Time, 1)
	if cancelAtFirstUsage {
		go func() {
			// Mid-stream is when the backend reported usage, or when the
			// agent told some (a backend may hold it until the end).
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-c.usage.first:
				case <-tick.C:
					if r, _ := toldNow(s); r.Lo.Tokens() == 0 {
						continue
					}
				case <-ctx.Done():
					return
				}
				cancelled <- time.Now()
				cancel()
				return
			}
		}()
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		c.res, c.err = b.Call(ctx, req, c.usage.report)
		c.usage.callReturned()
	}()
	select {
	case <-done:
	case <-time.After(callLimit):
		t.Fatalf("Call has not returned after %s", callLimit)
	}
	end := time.Now()
	c.took = end.Sub(start)
	select {
	case at := <-cancelled:
		c.cancelled, c.stopTook = true, end.Sub(at)
	default:
		if cancelAtFirstUsage {
			t.Fatalf("Call returned (err %v) before any usage was reported or told, so it was never cancelled", c.err)
		}
	}
	c.usage.check(t)
	return c
}

// told reads what the scripted agent told of its usage: nothing if it never
// got to say anything.
func told(t *testing.T, s Script) toldRecord {
	t.Helper()
	r, err := toldNow(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func toldNow(s Script) (toldRecord, error) {
	var r toldRecord
	data, err := os.ReadFile(filepath.Join(s.State, toldFile))
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", toldFile, err)
	}
	return r, nil
}

// RecordTold is for an in-process backend with no agent to tell its usage
// as it goes (sim): it records that the call may have told anything
// between lo and hi.
func RecordTold(t testing.TB, s Script, lo, hi Usage) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.State, toldFile), JSON(toldRecord{Lo: lo, Hi: hi}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// requireToldOnce checks the reported usage against what the agent told:
// every told token reported, none twice.
func requireToldOnce(t *testing.T, c call) {
	t.Helper()
	r := told(t, c.script)
	lo, hi := r.Lo, r.Hi
	if r.UnreadOnCancel && c.cancelled {
		// The call was cancelled: what the provider wrote after the
		// backend's last read is gone, and rightly not counted.
		lo = Usage{}
	}
	got := c.usage.sum()
	for _, f := range []struct {
		name        string
		got, lo, hi int64
	}{
		{"input tokens", got.Input, lo.Input, hi.Input},
		{"cache-read tokens", got.CacheRead, lo.CacheRead, hi.CacheRead},
		{"cache-write tokens", got.CacheWrite, lo.CacheWrite, hi.CacheWrite},
		{"output tokens", got.Output, lo.Output, hi.Output},
		{"reported nano-dollars", int64(got.USD), int64(lo.USD), int64(hi.USD)},
	} {
		if f.got < f.lo || f.got > f.hi {
			// lo < hi only when the agent was stopped in the middle of a write.
			t.Errorf("%s: the backend reported %d; the agent's output told %d (%d if its last write was read): usage lost or counted twice",
				f.name, f.got, f.lo, f.hi)
		}
	}
}

func testUsage(t *testing.T, h Harness) {
	t.Run("every token the provider reports lands once", func(t *testing.T) {
		want := Usage{Input: 12_000, CacheRead: 8_000, Output: 600, USD: budget.Dollars(6) / 100}
		c := h.do(t, Script{Usage: want, Replies: 3, Pace: 20 * time.Millisecond}, context.Background(), nil, false)
		if c.err != nil {
			t.Fatalf("Call: %v", c.err)
		}
		got := c.usage.sum()
		if !h.supports(ReportsUSD) {
			want.USD = 0
		}
		if got != want {
			t.Errorf("the backend reported %s in all; the provider reported %s", got, want)
		}
		requireToldOnce(t, c)
	})
	for _, r := range h.Replays {
		t.Run("a captured run lands whole: "+filepath.Base(r.File), func(t *testing.T) {
			c := h.do(t, Script{Replay: r.File}, context.Background(), nil, false)
			if (c.err != nil) != r.Failed {
				t.Errorf("Call returned %v; the captured run failed: %v", c.err, r.Failed)
			}
			if got := c.usage.sum(); got != r.Want {
				t.Errorf("the backend reported %s in all; the captured run reported %s", got, r.Want)
			}
		})
	}
}

func testCancel(t *testing.T, h Harness) {
	t.Run("a call cancelled mid-stream returns with the context's error", func(t *testing.T) {
		s := Script{Usage: Usage{Input: 40_000, CacheRead: 20_000, Output: 4_000}, Replies: 40, Pace: 150 * time.Millisecond}
		c := h.do(t, s, context.Background(), nil, true)
		if !errors.Is(c.err, context.Canceled) {
			t.Errorf("Call returned %v; want the context's error (context.Canceled)", c.err)
		}
		if c.stopTook > Bound {
			t.Errorf("Call returned %s after its context was cancelled; want within %s", c.stopTook, Bound)
		}
		requireToldOnce(t, c)
		if got := c.usage.sum(); got.Tokens() >= s.Usage.Tokens() {
			t.Errorf("all the run's usage (%s) was reported: the cancel did not stop it", got)
		}
		if h.supports(ProcessGroup) {
			requireProcessesGone(t, c.script.State, Bound)
		}
	})
}

func testStop(t *testing.T, h Harness) {
	h.require(t, ProcessGroup)
	t.Run("an agent deaf to signals is killed with its helpers", func(t *testing.T) {
		s := Script{Usage: Usage{Input: 1_000, Output: 100}, Replies: 1, Pace: 10 * time.Millisecond, End: EndHang, Stubborn: true, Children: true}
		c := h.do(t, s, context.Background(), nil, true)
		if !errors.Is(c.err, context.Canceled) {
			t.Errorf("Call returned %v; want context.Canceled", c.err)
		}
		if c.stopTook > Bound {
			t.Errorf("Call returned %s after its context was cancelled; want within %s", c.stopTook, Bound)
		}
		requireProcessesGone(t, c.script.State, Bound)
		requireToldOnce(t, c)
	})
	t.Run("helpers an agent leaves running go with it", func(t *testing.T) {
		// The pause lets the backend see the helper that left the group
		// while the agent still runs: after, it belongs to nobody.
		s := Script{Usage: Usage{Input: 1_000, Output: 100}, Replies: 1, Pace: time.Second, Children: true}
		c := h.do(t, s, context.Background(), nil, false)
		if c.err != nil {
			t.Errorf("Call: %v", c.err)
		}
		requireProcessesGone(t, c.script.State, Bound)
	})
}

func testHostile(t *testing.T, h Harness) {
	h.require(t, AgentOutput)
	// badOutput checks a call whose output was unusable: it failed, or, if
	// the backend takes free text, it says what was wrong.
	badOutput := func(t *testing.T, c call) {
		t.Helper()
		switch {
		case c.err != nil:
			t.Logf("error: %v", c.err)
		case !h.supports(RejectsBadOutput) && c.res.Note != "":
			t.Logf("no error (%s); note: %s", h.Unsupported[RejectsBadOutput], c.res.Note)
		case !h.supports(RejectsBadOutput):
			t.Errorf("the call succeeded with nothing in its note: unusable output must be said")
		default:
			t.Errorf("the call succeeded (result %+v); want an error", c.res)
		}
		requireToldOnce(t, c)
	}
	t.Run("binary garbage", func(t *testing.T) {
		badOutput(t, h.do(t, Script{End: EndGarbage}, context.Background(), nil, false))
	})
	t.Run("no output at all", func(t *testing.T) {
		badOutput(t, h.do(t, Script{End: EndEmpty}, context.Background(), nil, false))
	})
	t.Run("a crash with a message on stderr", func(t *testing.T) {
		c := h.do(t, Script{End: EndCrash}, context.Background(), nil, false)
		if c.err == nil || !strings.Contains(c.err.Error(), CrashMessage) {
			t.Errorf("Call returned %v; want an error that says %q", c.err, CrashMessage)
		}
		requireToldOnce(t, c)
	})
	t.Run("output cut off in the middle of a JSON line", func(t *testing.T) {
		c := h.do(t, Script{Usage: Usage{Input: 3_000, Output: 300}, Replies: 2, End: EndTruncated}, context.Background(), nil, false)
		if c.err == nil {
			t.Errorf("Call succeeded (result %+v); want an error for the cut-off run", c.res)
		} else {
			t.Logf("error: %v", c.err)
		}
		requireToldOnce(t, c)
	})
	t.Run("a line of tens of MB, then a good run", func(t *testing.T) {
		s := Script{Usage: Usage{Input: 3_000, Output: 300}, Replies: 2, HugeLine: true}
		c := h.do(t, s, context.Background(), nil, false)
		if c.err != nil {
			// Refusing the stream is fair; holding the line, or a panic,
			// is not (the suite would not get here).
			t.Logf("the backend refused the stream: %v", c.err)
		} else if got, want := c.usage.sum().Tokens(), s.Usage.Tokens(); got != want {
			t.Errorf("the call succeeded with %d tokens reported; the run after the huge line reported %d", got, want)
		}
		requireToldOnce(t, c)
	})
	t.Run("an agent that hangs silently is stopped at the call's deadline", func(t *testing.T) {
		// Not deaf to signals: on a loaded machine the deadline may come
		// before the agent is up (the stop subtests cover deaf agents).
		const deadline = 2 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		c := h.do(t, Script{End: EndSilent}, ctx, nil, false)
		if !errors.Is(c.err, context.DeadlineExceeded) {
			t.Errorf("Call returned %v; want context.DeadlineExceeded", c.err)
		}
		if c.took > deadline+Bound {
			t.Errorf("Call returned %s after it started, past its %s deadline by more than %s", c.took, deadline, Bound)
		}
		if !h.supports(ProcessGroup) {
			return
		}
		if _, err := os.Stat(filepath.Join(c.script.State, pidsFile)); err != nil {
			t.Logf("the agent was stopped before it was up: it left nothing to check")
			return
		}
		requireProcessesGone(t, c.script.State, Bound)
	})
}

func testLimits(t *testing.T, h Harness) {
	t.Run("MaxOutputTokens caps the output", func(t *testing.T) {
		h.require(t, OutputCap)
		const limit = 2_000
		s := Script{Usage: Usage{Input: 3_000, Output: 9_000}, Replies: 3}
		c := h.do(t, s, context.Background(), func(r *purser.CallRequest) { r.MaxOutputTokens = limit }, false)
		if c.err != nil {
			t.Fatalf("Call: %v", c.err)
		}
		got := c.usage.sum()
		if got.Output > limit || got.Output == 0 {
			t.Errorf("%d output tokens under MaxOutputTokens %d (the agent wanted %d)", got.Output, limit, s.Usage.Output)
		}
		requireToldOnce(t, c)
	})
	t.Run("MaxUSD is the agent's spending fence", func(t *testing.T) {
		h.require(t, USDFence)
		s := Script{Usage: Usage{Input: 30_000, Output: 3_000, USD: budget.Dollars(3) / 10}, Replies: 3}
		fence := budget.Dollars(15) / 100
		c := h.do(t, s, context.Background(), func(r *purser.CallRequest) { r.MaxUSD = fence }, false)
		if !errors.Is(c.err, budget.ErrInsufficientBudget) {
			t.Errorf("Call returned %v; want an error matching budget.ErrInsufficientBudget (a stop by the fence)", c.err)
		}
		requireToldOnce(t, c)
		if spent := told(t, c.script).Hi.USD; spent >= s.Usage.USD {
			t.Errorf("the agent spent %s of its %s run under a %s fence: the fence never reached it", spent, s.Usage.USD, fence)
		}
	})
}

func testSecrets(t *testing.T, h Harness) {
	h.require(t, AgentOutput)
	t.Setenv(secretEnv, envSecret)
	secret := shapeSecret + " " + envSecret
	for _, tt := range []struct {
		name string
		s    Script
	}{
		{"a failure after a reply", Script{Usage: Usage{Input: 1_000, Output: 100}, Replies: 1, End: EndFailure}},
		{"a failure before any reply", Script{End: EndFailure}},
		{"a cut-off run with a secret on stderr", Script{Usage: Usage{Input: 1_000, Output: 100}, Replies: 1, End: EndTruncated}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.s.Secret = secret
			c := h.do(t, tt.s, context.Background(), nil, false)
			if c.err == nil {
				t.Fatalf("Call succeeded (result %+v); want the failure", c.res)
			}
			for _, leaked := range []string{shapeSecret, envSecret} {
				if strings.Contains(c.err.Error(), leaked) {
					t.Errorf("the error carries the secret %q: %v", leaked, c.err)
				}
				if strings.Contains(c.res.Note, leaked) {
					t.Errorf("CallResult.Note carries the secret %q: %s", leaked, c.res.Note)
				}
			}
			t.Logf("error: %v", c.err)
		})
	}
}
