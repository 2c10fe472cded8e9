package proc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// CLICall is one call of an agent CLI as its backend describes it to
// CLIOptions.Call: only what differs between CLIs. A backend makes one per
// call, its funcs sharing the call's parser; a nil func is a step the CLI
// does not have.
type CLICall struct {
	// Backend names the CLI in errors, faults and the wire journal: "codex".
	Backend string
	// Needs are the names of Purser's environment the CLI needs in a box
	// (the settings that pick its provider, …); the allow-list keeps the
	// rest out. Its provider keys are Keys', which enter no box: the
	// lane's token does.
	Needs []string
	// Keys are the names the CLI reads its provider key from: the door
	// holds the key and the CLI gets a scoped token in its place (keys.go).
	Keys Credentials
	// Unmetered says why the CLI cannot be put behind the door when
	// Upstream is "" (Bedrock, Vertex, a built-in provider).
	Unmetered string
	// Seed are the CLI's settings files copied into a box's HOME before
	// each call, by their path under it, from the host file ("" or a file
	// that does not exist: none): the user's settings, never credentials
	// (those come by Needs). Copied anew each call, so that what the agent
	// wrote there last time does not stay the CLI's settings.
	Seed map[string]string
	// Upstream is the provider base URL the CLI would use, put behind the
	// wire meter; "" when the CLI cannot be redirected (not metered).
	Upstream string
	// Command is the child to run given the call's wire meter (nil when not
	// metered): its Args, Env, Stdin, Interrupt and Grace, and a note for
	// the call's record (a setting that could not be applied). Call sets
	// Path, Dir, Started, Stall and Progress.
	Command func(wire *WireMeter) (Command, string)
	// Feed reads one line of the CLI's output and returns the usage it adds.
	Feed func(line []byte) ([]budget.UsageEvent, error)
	// Retries counts the retries the CLI announced in its output so far:
	// a line that adds one is told to the engine as an inner retry.
	Retries func() int
	// GiveUp, asked after a line that announced a retry, returns the error
	// to end the call with at once (Codex waiting for the network without
	// end), or nil to let the CLI go on.
	GiveUp func() error
	// Session is the session file the output has named so far ("" while
	// none): told to the engine once, as soon as it is known.
	Session func() string
	// Follow, when set, is the CLI's session file, followed while the CLI
	// runs for usage its output does not show yet.
	Follow *FollowSession
	// Also, when set, is given once, before the CLI starts, the report
	// that the backend's other readers of the CLI's own usage (a
	// sub-agent's session files) must use: booked only where the CLI's
	// report is the call's source, a cross-check behind the door (the door
	// books the sub-agents' requests too).
	Also func(report purser.UsageFunc)
	// Finish says what the call came to once the CLI has exited: it sets
	// res's text and adds to its note, reports to report usage known only
	// now (a reconciliation, a recovery: booked only where the CLI is the
	// call's source, source.go), and returns the failure of a call that was
	// neither stopped nor stalled (nil when it succeeded). recovered is how
	// many events the followed session file gave that were booked (none
	// behind the door).
	Finish func(out Outcome, parseErr error, recovered int, report purser.UsageFunc, res *purser.CallResult) error
}

// FollowSession is the session file a CLI writes as it runs.
type FollowSession struct {
	// Find returns the file once it can be told ("" until then); the file
	// found is told to the engine with the call, for a resume to read.
	Find func() string
	// Feed reads one line of the file and returns the usage it adds.
	Feed func(line []byte) []budget.UsageEvent
	// Every is how often the file is read.
	Every time.Duration
}

// Call runs one call of an agent CLI, the same way for every CLI: its wire
// meter started and its journal recorded, its session file followed, its
// output fed line by line (usage reported as it comes, retries and the
// session told to the engine), then what it came to: ctx's cause when it
// was stopped, a stall, the wire meter's fault when the provider could not
// be reached, else c.Finish's answer. Behind the door, the door's replies
// are the usage booked, the CLI's report a cross-check (source.go).
func (o CLIOptions) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc, c CLICall) (purser.CallResult, error) {
	src := &usageSource{report: report, price: req.Price}
	wire, wireNote, err := o.openDoor(ctx, req.Hooks, c, src.fromDoor)
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("%s: %w", c.Backend, err)
	}
	if wire == nil {
		src.source = sourceCLI // no door: the CLI's report is all there is
	} else {
		src.requests = wire.requests
	}
	report = src.fromCLI
	if c.Also != nil {
		c.Also(report)
	}
	if c.GiveUp != nil {
		var giveUp context.CancelCauseFunc
		ctx, giveUp = context.WithCancelCause(ctx)
		defer giveUp(nil)
		ask := c.GiveUp
		c.GiveUp = func() error {
			err := ask()
			if err != nil {
				giveUp(err)
			}
			return err
		}
	}
	box, err := o.boxFor(req, wire, c.Seed)
	if err != nil {
		wire.End(ctx)
		return purser.CallResult{}, fmt.Errorf("%s: %w", c.Backend, err)
	}
	defer box.close()
	cmd, note := c.Command(wire)
	cmd.Path, cmd.Dir = o.Command, req.Workspace
	cmd.Env = withToken(cmd.Env, c.Keys, wire.tokenName(), wire.token())
	if box != nil {
		if err := box.command(ctx, &cmd, c.boxNeeds(wire)); err != nil {
			wire.End(ctx)
			return purser.CallResult{}, fmt.Errorf("%s: %w", c.Backend, err)
		}
	}
	recovered, progress, stopFollowing := c.follow(req.Hooks, report)
	cmd.Started = req.Hooks.Started
	cmd.Stall, cmd.Progress = req.StallTimeout, wire.Progress(progress)
	var parseErr error
	out, err := Run(ctx, cmd, c.onLine(req.Hooks, report, &parseErr))
	// The last poll reads what the file holds that was not read yet: a
	// killed run leaves its usage only there.
	stopFollowing()
	note = purser.JoinNotes(note, purser.JoinNotes(wireNote, wire.End(ctx)))
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("%s: %w", c.Backend, err)
	}
	res := purser.CallResult{Note: note}
	failure := c.Finish(out, parseErr, src.fromFile(recovered()), report, &res)
	res.Note = purser.JoinNotes(purser.JoinNotes(res.Note, src.note()), purser.JoinNotes(src.settle(), o.keyNote(c, wire)))
	switch {
	case out.Stopped:
		return res, context.Cause(ctx)
	case out.Stalled:
		return res, out.Stall()
	case failure != nil:
		if f := wire.Fault(c.Backend); f != nil {
			// The CLI saw the meter's 502; the provider was not reached.
			return res, f
		}
		return res, failure
	}
	return res, nil
}

// openDoor opens the call's lane of the door, holding the CLI's key, when
// the CLI can be put behind it; a boxed call that cannot be, and whose CLI
// would need its own key, is refused.
func (o CLIOptions) openDoor(ctx context.Context, hooks purser.CallHooks, c CLICall, report purser.UsageFunc) (*WireMeter, string, error) {
	if c.Upstream == "" || (o.WireMeter != nil && !*o.WireMeter) {
		why := c.Unmetered
		if o.WireMeter != nil && !*o.WireMeter {
			why = "wireMeter: false"
		}
		if err := o.refuseKeyInBox(c.Keys, why); err != nil {
			return nil, "", err
		}
		return nil, "", nil
	}
	w, note, err := o.StartWireMeter(ctx, hooks, c.Backend, c.Upstream, o.DoorKey(c.Keys), report)
	if err == nil && w == nil {
		err = o.refuseKeyInBox(c.Keys, note)
	}
	return w, note, err
}

// keyNote says, last in the call's note and by name only, whose key the
// provider got: the door's, or (where the door could not stand in front)
// the CLI's own.
func (o CLIOptions) keyNote(c CLICall, wire *WireMeter) string {
	switch d := o.DoorKey(c.Keys); {
	case wire.token() != "":
		return "key held at the door (" + d.Key.Name() + ")"
	case wire == nil && d.Held():
		return "key: the CLI's own, not behind the door"
	}
	return ""
}

// boxNeeds are the names the box lets in for the CLI: its Needs, but of
// its provider keys only the one the lane's token stands in for.
func (c CLICall) boxNeeds(wire *WireMeter) []string {
	keys := c.Keys.all()
	var out []string
	for _, n := range c.Needs {
		if !slices.Contains(keys, n) {
			out = append(out, n)
		}
	}
	if n := wire.tokenName(); n != "" {
		out = append(out, n)
	}
	return out
}

// follow starts following the session file, if the CLI has one. It returns
// how many events the file gave so far, the file's progress for the stall
// detector (nil for none), and the function that stops following.
func (c CLICall) follow(hooks purser.CallHooks, report purser.UsageFunc) (recovered func() int, progress func() int64, stop func()) {
	n := 0 // written by the follower's goroutine; read once stop has returned
	if c.Follow == nil {
		return func() int { return n }, nil, func() {}
	}
	f := &Follower{
		Find: func() string {
			// Recorded with the call as soon as it is found: a resume
			// after a crash reads what the call spent from it.
			file := c.Follow.Find()
			if file != "" {
				hooks.Session(file)
			}
			return file
		},
		OnLine: func(l Line) {
			for _, ev := range c.Follow.Feed(l.Text) {
				report(ev)
				n++
			}
		},
	}
	return func() int { return n }, f.Offset, f.Every(c.Follow.Every)
}

// onLine is what Call does with each line of the CLI's output.
func (c CLICall) onLine(hooks purser.CallHooks, report purser.UsageFunc, parseErr *error) func([]byte) {
	sessionTold := false
	return func(line []byte) {
		retries := 0
		if c.Retries != nil {
			retries = c.Retries()
		}
		evs, err := c.Feed(line)
		if err != nil && *parseErr == nil {
			*parseErr = err
		}
		if c.Retries != nil && c.Retries() > retries {
			hooks.InnerRetry() // one the CLI made by itself: counted
			if c.GiveUp != nil {
				_ = c.GiveUp()
			}
		}
		if c.Session != nil && !sessionTold {
			if file := c.Session(); file != "" {
				// Recorded with the call at once, before any reply: a
				// resume after a crash reads what the call spent from it.
				sessionTold = true
				hooks.Session(file)
			}
		}
		for _, ev := range evs {
			report(ev)
		}
	}
}

// Unfinished is the failure of a CLI that exited without its final line
// (what says so): transient when its stderr tells a transient fault.
func (o Outcome) Unfinished(backend, what string, parseErr error) error {
	msg := o.Incomplete(what, parseErr)
	if f := TextFault(o.Stderr); f.Transient() {
		return &FaultError{Backend: backend, Fault: f, Detail: msg}
	}
	return errors.New(msg)
}
