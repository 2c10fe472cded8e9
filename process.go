package purser

import (
	"context"
	"strings"

	"github.com/purser-dev/purser/budget"
)

// CallHooks are how a backend tells the engine, while a call runs, what a
// resume after a crash will need and what the budget report counts. The
// engine sets them in CallRequest.Hooks; a backend calls them through the
// methods, which do nothing for a hook left nil (a test, a tool that records
// nothing). They may be called from any goroutine of the backend.
type CallHooks struct {
	// OnStarted receives the ID of the process that runs the call, before
	// the agent sends anything, so that the engine records it with the
	// call: on resume the engine has the processes of a call its dead
	// predecessor left running ended before it starts anything.
	OnStarted func(process string)
	// OnSession receives the file the CLI keeps the call's session in, as
	// soon as the backend knows it, so that a resume after a crash can read
	// what the call spent from it.
	OnSession func(file string)
	// OnWire receives the journal the backend's metering proxy writes the
	// usage of the call's replies to, before the agent sends anything, so
	// that a resume after a crash can read it.
	OnWire func(journal string)
	// OnInnerRetry is called for each retry the agent's CLI or client made
	// by itself (one Purser could not switch off).
	OnInnerRetry func()
	// Admit admits each model request the agent sends through Purser's
	// door during the call (nil: requests are not admitted one by one,
	// only the call as a whole).
	Admit WireAdmitter
}

// Started says which process runs the call, an ID only the backend's
// LeftoverKiller needs to understand.
func (h CallHooks) Started(process string) {
	if h.OnStarted != nil {
		h.OnStarted(process)
	}
}

// Session says which file the CLI keeps the call's session in.
func (h CallHooks) Session(file string) {
	if h.OnSession != nil {
		h.OnSession(file)
	}
}

// Wire says which journal the call's metering proxy writes to.
func (h CallHooks) Wire(journal string) {
	if h.OnWire != nil {
		h.OnWire(journal)
	}
}

// InnerRetry says that the agent retried a request by itself.
func (h CallHooks) InnerRetry() {
	if h.OnInnerRetry != nil {
		h.OnInnerRetry()
	}
}

// LeftoverKiller is implemented by Owners that can end what a call's
// process (as given to CallHooks.Started) left running after its owner died.
type LeftoverKiller interface {
	// KillLeftovers kills every process still running for the call, and
	// reports how many it found.
	KillLeftovers(process string) int
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
