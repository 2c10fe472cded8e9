package proc

import (
	"fmt"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// The source of truth of a CLI call's usage.
//
// Behind the door (a call with a lane), every model request the CLI makes
// passes the door, which reads each reply's usage as the provider bills it:
// the CLI's own requests, its sub-agents', its retries, compaction and
// title generation alike, most of which no CLI reports on its stdout (a
// measured Claude Code call: provider 111,471 tokens, stdout 11,465). So
// the door books the call's usage, and what the CLI says of it (stdout,
// its session file, the reconciliation at its end) is kept as a
// cross-check only: counted, compared at the end, never booked.
//
// A CLI that reports usage before the door has forwarded any model request
// of the call reaches its model some other way than the door (a stand-in
// that replays a recording, a setting that routes around it): for that
// call, the CLI's own report stays the source, as it is where there is no
// lane (wireMeter: false, Bedrock, Vertex), and the door only journals. The
// source is decided once per call, by whichever reports first, so that no
// usage is booked from both.

// Where a call's usage is booked from.
const (
	sourceUndecided = iota
	sourceDoor      // the door's replies: the CLI's report is a cross-check
	sourceCLI       // the CLI's own report: the door journals only
)

// usageSource decides, once per call, whether the door or the CLI books
// the call's usage, and keeps the other's count for the cross-check.
type usageSource struct {
	report   purser.UsageFunc
	requests func() int // model requests the door has forwarded so far
	// price is how the engine prices what is booked
	// (purser.CallRequest.Price; nil: the dollars are not compared).
	price func(budget.UsageEvent) budget.UsageEvent

	mu     sync.Mutex
	source int
	door   tally // what the door read, booked or not
	cli    tally // what the CLI reported, booked or not
	// pending is what the CLI reported while the source was undecided
	// after the door had forwarded a request: booked at the end (settle)
	// if the door never read any usage, so that the call is not $0.
	pending []budget.UsageEvent
}

// tally is a count of usage events, and their dollars as priced.
type tally struct {
	events   int
	tokens   int64
	usd      budget.USD // the priced events' dollars (reported or estimated)
	reported bool       // one of them was reported by the CLI
	unknown  int64      // events with tokens and no price
	model    string     // the first unpriced event's model
}

func (t *tally) add(ev budget.UsageEvent, price func(budget.UsageEvent) budget.UsageEvent) {
	t.events++
	t.tokens = budget.SatAdd(t.tokens, ev.Tokens())
	if price != nil {
		ev = price(ev)
	}
	switch ev.CostSource {
	case budget.CostReported:
		t.reported = true
		t.usd += ev.USD
	case budget.CostEstimated:
		t.usd += ev.USD
	case budget.CostUnknown:
		t.unknown++
		if t.model == "" {
			t.model = ev.Model
		}
	}
}

// fromDoor is the door's report of one reply (the lane's Report): booked
// when the door is the call's source. The door journals every reply
// before it reports it, whoever books it.
func (s *usageSource) fromDoor(ev budget.UsageEvent) {
	s.mu.Lock()
	if s.source == sourceUndecided {
		s.source, s.pending = sourceDoor, nil
	}
	s.door.add(ev, s.price)
	book := s.source == sourceDoor
	s.mu.Unlock()
	if book {
		s.report(ev)
	}
}

// fromCLI is the CLI's own report of usage (its stdout, its session file,
// its final reconciliation): booked only when the CLI is the call's source.
func (s *usageSource) fromCLI(ev budget.UsageEvent) {
	// Asked before the lock: on a lane of the door's service it is a
	// round trip whose answer may wait on a report of the door's, which
	// takes the lock (fromDoor).
	s.mu.Lock()
	undecided := s.source == sourceUndecided
	s.mu.Unlock()
	forwarded := 0
	if undecided {
		forwarded = s.requests()
	}
	s.mu.Lock()
	if s.source == sourceUndecided && forwarded == 0 {
		s.source = sourceCLI
	}
	s.cli.add(ev, s.price)
	if s.source == sourceUndecided {
		s.pending = append(s.pending, ev)
	}
	book := s.source == sourceCLI
	s.mu.Unlock()
	if book {
		s.report(ev)
	}
}

// fromFile is how many of n events read from the CLI's session file were
// booked: all where the CLI is the call's source, none behind the door.
func (s *usageSource) fromFile(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.source == sourceCLI {
		return n
	}
	return 0
}

// note is the cross-check for the call's record, once the call is over
// (the door's replies all booked): "" when the two sources agree, or when
// only one of them spoke of usage.
func (s *usageSource) note() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.source == sourceDoor && s.cli.events > 0 && s.cli.tokens != s.door.tokens:
		return fmt.Sprintf("usage booked from the door: %d tokens in %d replies; the CLI's own report said %d tokens (a cross-check, not booked)",
			s.door.tokens, s.door.events, s.cli.tokens)
	case s.source == sourceDoor && s.cli.events == 0:
		return fmt.Sprintf("usage booked from the door: %d tokens in %d replies; the CLI reported none", s.door.tokens, s.door.events)
	case s.source == sourceCLI && s.door.events > 0:
		return fmt.Sprintf("usage booked from the CLI's own report (it reported before any request reached the door); the door journalled %d tokens in %d replies",
			s.door.tokens, s.door.events)
	}
	return ""
}

// settle books, where the door is the call's source and booked replies of
// a model Purser has no price for, the dollars the CLI's own report gives
// beyond the door's priced replies (Claude Code's total_cost_usd): the
// money cap must see them, and unknown is never $0. Reported by the CLI,
// they settle the door's unpriced replies (SettlesUnknown); a figure the
// CLI labelled estimated (its guess at a model it does not price either)
// counts, and the replies stay unknown. It returns what it says of it for
// the call's note ("" when nothing is booked). Called once, after the CLI
// has exited and the door's replies are all booked.
func (s *usageSource) settle() string {
	s.mu.Lock()
	if s.source == sourceUndecided && len(s.pending) > 0 {
		// The door forwarded requests but read no usage from any reply
		// (error replies only, or a shape its tap cannot read): the CLI's
		// own report is all there is, and the call is not left at $0.
		pending := s.pending
		s.source, s.pending = sourceCLI, nil
		s.mu.Unlock()
		for _, ev := range pending {
			s.report(ev)
		}
		return fmt.Sprintf("usage booked from the CLI's own report: the door forwarded requests but read no usage in their replies (%d events)", len(pending))
	}
	door, cli := s.door, s.cli
	book := s.source == sourceDoor && s.price != nil && door.unknown > 0 && cli.usd > door.usd
	s.mu.Unlock()
	if !book {
		return ""
	}
	ev := budget.UsageEvent{Model: door.model, USD: cli.usd - door.usd, CostSource: budget.CostEstimated}
	if cli.reported {
		ev.CostSource, ev.SettlesUnknown = budget.CostReported, door.unknown
	}
	s.report(ev)
	return fmt.Sprintf("the door's %d replies with no price in Purser's catalogue are counted at the CLI's own figure: %s beyond the door's priced replies (%s)",
		door.unknown, ev.USD, ev.CostSource)
}
