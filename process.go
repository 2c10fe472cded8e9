package purser

import "context"

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
