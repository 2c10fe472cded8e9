package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/internal/usagedelta"
	"github.com/purser-dev/purser/backend/meter"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/gateway"
	"github.com/purser-dev/purser/redact"
)

// journalAge is how long a wire journal is kept: one left by a call whose
// owner died is read by the resume; older ones never will be.
const journalAge = 30 * 24 * time.Hour

var pruneOnce sync.Once

// WireMeter is a call's lane of Purser's door (package gateway) as a CLI
// backend uses it: nil when the call is not metered, and every method is
// then a no-op. The lane holds the CLI's provider key where one is found
// (keys.go; else the CLI's own credentials pass through); the door meters,
// journals and books every reply (source.go: the call's source of truth
// for usage), admits each request when the engine asks it to
// (CallHooks.Admit), and cuts a reply in flight when the call is stopped.
type WireMeter struct {
	lane    *gateway.Lane
	env     []string
	keyName string // the variable the CLI gets the lane's token under
}

// wireProtocol is the door's protocol of a CLI backend.
func wireProtocol(backend string) string {
	switch backend {
	case "codex", "openai":
		return gateway.OpenAIResponses
	case "gemini":
		return gateway.Gemini
	}
	return gateway.Anthropic
}

// StartWireMeter opens the call's lane of the door in front of upstream
// (the provider's base URL as the CLI would have used it) when the options
// allow it, holding key (the zero DoorKey: none, the CLI's own credentials
// pass), and records its journal with the call before the agent starts
// (hooks.Wire). Each reply's usage goes to report (nil: journalled only)
// the moment it is whole, after its journal line. It returns the meter, or
// nil and why not. A key that cannot be read is an error: the CLI is not
// run without the door's key, nor given the real one.
func (o CLIOptions) StartWireMeter(ctx context.Context, hooks purser.CallHooks, backend, upstream string, key DoorKey, report purser.UsageFunc) (*WireMeter, string, error) {
	if o.WireMeter != nil && !*o.WireMeter {
		return nil, "", nil
	}
	dir := meter.Dir()
	pruneOnce.Do(func() { meter.Prune(dir, journalAge) })
	lane, err := gateway.Open(ctx, gateway.LaneConfig{Protocol: wireProtocol(backend), Upstream: upstream, Admit: hooks.Admit,
		Journal: meter.NewJournal(dir, backend), Key: key.Key, Getenv: o.Getenv, Report: report})
	if err != nil && key.Held() {
		return nil, "", fmt.Errorf("the door's key (%s): %w", key.Key.Name(), err)
	}
	if errors.Is(err, gateway.ErrServiceDown) {
		// Told to use the door's service: a call never goes unmetered
		// because it is down (fail closed).
		return nil, "", err
	}
	if err != nil {
		return nil, "not metered at the wire: " + err.Error(), nil
	}
	hooks.Wire(lane.Journal())
	// A CLI told to use an HTTP proxy must reach the door directly.
	var env []string
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		v := o.Getenv(k)
		if v != "" {
			v += ","
		}
		env = append(env, k+"="+v+"127.0.0.1")
	}
	w := &WireMeter{lane: lane, env: env, keyName: key.Name}
	return w, "", nil
}

// token is the lane's scoped token ("" for no meter, or a lane holding no
// key).
func (w *WireMeter) token() string {
	if w == nil {
		return ""
	}
	return w.lane.Token()
}

// tokenName is the variable the CLI gets the lane's token under ("" when
// there is none).
func (w *WireMeter) tokenName() string {
	if w.token() == "" {
		return ""
	}
	return w.keyName
}

// Env is what the CLI's environment needs for the door to be reached (nil
// for no meter): loopback exempt from any HTTP proxy it is told to use.
func (w *WireMeter) Env() []string {
	if w == nil {
		return nil
	}
	return w.env
}

// Progress adds the bytes the provider sent through the door to another
// measure of progress (a session file's size; nil for none), for the stall
// detector: a reply streaming in is no stall, whatever the CLI prints.
func (w *WireMeter) Progress(other func() int64) func() int64 {
	if w == nil {
		return other
	}
	return func() int64 {
		n := w.lane.Carried()
		if other != nil {
			n += other()
		}
		return n
	}
}

// Fault is the call's failure as the door saw it: when the last request
// could not reach the provider, a refused connection (or a timeout)
// whatever the CLI made of the 502 the door answered it with; else nil.
func (w *WireMeter) Fault(backend string) error {
	if w == nil {
		return nil
	}
	err := w.lane.LastError()
	if err == nil {
		return nil
	}
	f := TextFault(err.Error())
	if f != FaultTimeout {
		f = FaultRefused // no answer from the provider: nothing listens, or the network is down
	}
	return &FaultError{Backend: backend, Fault: f, Detail: "the provider could not be reached: " + redact.String(err.Error())}
}

// Metering says in one line what StartWireMeter would do for a call of
// backend to upstream ("" when the backend cannot redirect its CLI, with
// why).
func (o CLIOptions) Metering(upstream, why string) string {
	switch {
	case o.WireMeter != nil && !*o.WireMeter:
		return "off (wireMeter: false): usage booked from the CLI's own report; a reply the CLI dies holding is not recovered"
	case upstream == "":
		return "not metered: " + why + "; usage booked from the CLI's own report"
	}
	return "Purser's door (gateway) on 127.0.0.1 in front of " + redact.String(upstream) + "; usage booked from the door, the CLI's own report a cross-check"
}

// requests is how many model requests the door has forwarded so far.
func (w *WireMeter) requests() int { return w.lane.Stats().Requests }

// URL is the base URL to give the CLI ("" for no meter).
func (w *WireMeter) URL() string {
	if w == nil {
		return ""
	}
	return w.lane.URL()
}

// End closes the lane once the call is over, every reply in flight booked
// or cut. The journal is kept only when the call was stopped from outside
// (ctx done: the hard cap, a signal), where the engine may reconcile the
// call from it; a call that ended by itself was counted whole, by the door
// or by the CLI's own report.
func (w *WireMeter) End(ctx context.Context) string {
	if w == nil {
		return ""
	}
	err := w.lane.Close()
	if ctx.Err() == nil {
		_ = os.Remove(w.lane.Journal())
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// Upstream is the provider base URL the CLI would use: baseVar as the CLI
// sees it, else defaultURL; or "" and why, when one of elsewhere is set to
// a true value (the CLI then reaches its model by other settings, which the
// meter cannot stand in front of).
func (o CLIOptions) Upstream(baseVar, defaultURL string, elsewhere ...string) (upstream, why string) {
	for _, k := range elsewhere {
		if v := o.Getenv(k); v != "" && v != "0" && !strings.EqualFold(v, "false") {
			return "", k + " is set: the CLI reaches its model by another base URL"
		}
	}
	if u := o.Getenv(baseVar); u != "" {
		return u, ""
	}
	return defaultURL, ""
}

// Getenv is an environment variable as the CLI sees it: the options' env,
// else Purser's.
func (o CLIOptions) Getenv(key string) string {
	if v, ok := o.Env[key]; ok {
		return v
	}
	return os.Getenv(key)
}

// Recovered is a SpendRecoverer's answer for a call whose session file
// (file, "" when none was found) held inFile: completed with the call's
// wire journal, it returns, per model, the larger of what the file and the
// journal hold — they count the same replies, the journal also one the CLI
// died holding — beyond what the ledger recorded. Where the door was the
// call's source (source.go), the ledger holds only replies the journal
// holds (each is journalled before it is booked), and the journal every
// reply the file does: what is returned is what was journalled and not yet
// booked when Purser died, once. With oneSum, or when the
// journal names a model neither the file nor the ledger does, the call is
// compared as one sum under its main model (a CLI that names a model
// otherwise than the provider must not have it counted twice).
func Recovered(q purser.SpendQuery, file, note string, inFile []budget.UsageEvent, oneSum bool) (purser.RecoveredSpend, error) {
	out := purser.RecoveredSpend{Session: file, Note: note}
	var wire []budget.UsageEvent
	if q.Call.Wire != "" {
		var err error
		var skipped int
		if wire, skipped, err = meter.ReadCounted(q.Call.Wire); err != nil {
			out.Note = purser.JoinNotes(out.Note, "wire journal unreadable: "+err.Error())
			wire = nil
		} else if skipped > 0 {
			out.Note = purser.JoinNotes(out.Note, fmt.Sprintf("%d unreadable line(s) of the wire journal skipped", skipped))
		}
	}
	known := map[string]bool{}
	for _, ev := range slices.Concat(inFile, q.Recorded) {
		known[ev.Model] = true
	}
	for _, ev := range wire {
		if !known[ev.Model] {
			oneSum = true
		}
	}
	recorded := q.Recorded
	if oneSum {
		model := ""
		for _, evs := range [][]budget.UsageEvent{inFile, wire, q.Recorded} {
			if len(evs) > 0 && model == "" {
				model = evs[0].Model
			}
		}
		recorded, inFile, wire = usagedelta.Sum(q.Recorded, model), usagedelta.Sum(inFile, model), usagedelta.Sum(wire, model)
	}
	fileTokens, wireTokens := tokensOf(inFile), tokensOf(wire)
	if wireTokens > fileTokens {
		src := "the session file"
		if file == "" {
			src = "no session file"
		}
		out.Note = purser.JoinNotes(out.Note, fmt.Sprintf("the wire journal %s holds %d tokens to %d in %s", q.Call.Wire, wireTokens, fileTokens, src))
	}
	out.Usage = usagedelta.Beyond(recorded, usagedelta.Most(inFile, wire))
	return out, nil
}

func tokensOf(evs []budget.UsageEvent) int64 {
	var n int64
	for _, ev := range evs {
		n += ev.Tokens()
	}
	return n
}
