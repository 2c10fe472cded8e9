package purser

import (
	"context"
	"strings"

	"github.com/purser-dev/purser/budget"
)

// A call's processes: the backend that starts an agent says which process
// leads it, before the agent sends anything, so that the engine records it
// with the call; and on resume the engine has the processes of a call its
// dead predecessor left running ended before it starts anything.

type callStartedKey struct{}

// WithCallStarted returns ctx carrying fn, which a backend calls through
// CallStarted once the call's process runs.
func WithCallStarted(ctx context.Context, fn func(process string)) context.Context {
	return context.WithValue(ctx, callStartedKey{}, fn)
}

// CallStarted tells whoever made the call (WithCallStarted) which process
// runs it, an ID only the backend's LeftoverKiller needs to understand.
// Without a listener it does nothing.
func CallStarted(ctx context.Context, process string) {
	if fn, ok := ctx.Value(callStartedKey{}).(func(string)); ok {
		fn(process)
	}
}

// LeftoverKiller is implemented by Owners that can end what a call's
// process (as given to CallStarted) left running after its owner died.
type LeftoverKiller interface {
	// KillLeftovers kills every process still running for the call, and
	// reports how many it found.
	KillLeftovers(process string) int
}

type callSessionKey struct{}

// WithCallSession returns ctx carrying fn, which a backend calls through
// CallSession once it knows the file its CLI keeps the call's session in.
func WithCallSession(ctx context.Context, fn func(file string)) context.Context {
	return context.WithValue(ctx, callSessionKey{}, fn)
}

// CallSession tells whoever made the call (WithCallSession) which file the
// CLI keeps the call's session in, as soon as the backend knows it, so that
// a resume after a crash can read what the call spent from it. Without a
// listener it does nothing.
func CallSession(ctx context.Context, file string) {
	if fn, ok := ctx.Value(callSessionKey{}).(func(string)); ok {
		fn(file)
	}
}

type callWireKey struct{}

// WithCallWire returns ctx carrying fn, which a backend calls through
// CallWire with the journal its metering proxy writes the call's usage to.
func WithCallWire(ctx context.Context, fn func(journal string)) context.Context {
	return context.WithValue(ctx, callWireKey{}, fn)
}

// CallWire tells whoever made the call (WithCallWire) which journal the
// backend's metering proxy writes the usage of the call's replies to, before
// the agent sends anything, so that a resume after a crash can read it.
// Without a listener it does nothing.
func CallWire(ctx context.Context, journal string) {
	if fn, ok := ctx.Value(callWireKey{}).(func(string)); ok {
		fn(journal)
	}
}

// SpendQuery asks a SpendRecoverer what a call spent beyond what the
// ledger holds for it.
type SpendQuery struct {
	// Call is the call as recorded: its Session when the backend gave one,
	// else its StartedAt and Model, from which the backend may locate it.
	Call CallRecord
	// Workspace is the task's workspace, where the CLI ran.
	Workspace string
	// Recorded is what the ledger holds for the call, its events summed per
	// model (tokens only; no dollars).
	Recorded []budget.UsageEvent
	// Claimed reports whether another call recorded file as its session: a
	// file located by time and place must never be another call's.
	Claimed func(file string) bool
}

// RecoveredSpend is what a SpendRecoverer found.
type RecoveredSpend struct {
	// Session is the file read ("" when none was found).
	Session string
	// Usage is what the file holds beyond SpendQuery.Recorded, one event per
	// model, tokens only: the engine prices it.
	Usage []budget.UsageEvent
	// Note says how the file was found and what it held, for the call's
	// record (e.g. that it was located by time because none was recorded).
	Note string
}

// SpendRecoverer is implemented by backends whose CLI keeps its own record
// of a call's usage (a session file that survives the CLI being killed).
// After a crash, and after a call the hard cap cut, the engine asks it for
// what the call spent that the ledger lacks.
type SpendRecoverer interface {
	RecoverSpend(ctx context.Context, q SpendQuery) (RecoveredSpend, error)
}

// Metered is implemented by backends that can say whether Purser meters
// their agent's traffic at the wire, and where it goes (purser check prints
// it: a user sees what the proxy stands in front of before anything runs).
type Metered interface {
	// Metering says it in one line, e.g. "wire meter in front of
	// https://api.anthropic.com", or why not.
	Metering() string
}

// JoinNotes joins two parts of a call's note with "; " (a trailing period of
// the first dropped); either may be empty.
func JoinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return strings.TrimSuffix(a, ".") + "; " + b
}
