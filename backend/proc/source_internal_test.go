package proc

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
)

// The source of a call's usage is decided once, by whichever reports
// first: the door (a real CLI's usage follows a request the door
// forwarded), or the CLI before any request reached the door (a stand-in
// replaying a recording). Nothing is booked from both, and the other's
// count is what the note compares.
func TestUsageSourceBooksOneSideOnly(t *testing.T) {
	ev := func(n int64) budget.UsageEvent { return budget.UsageEvent{Model: "m", InputTokens: n} }
	for _, tc := range []struct {
		name     string
		requests int // model requests the door forwarded before the CLI speaks
		steps    string
		want     int64
		note     string
		byCLI    bool // the CLI's report is the source
	}{
		{"the door first", 1, "door cli door cli", 200, "the CLI's own report said 20 tokens", false},
		{"the CLI after a request reached the door, before its reply was booked", 1, "cli door", 100, "the CLI's own report said 10 tokens", false},
		{"the CLI before any request reached the door", 0, "cli door cli", 20, "usage booked from the CLI's own report", true},
		{"the door alone", 1, "door door", 200, "the CLI reported none", false},
		{"the CLI alone", 0, "cli cli", 20, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var booked int64
			s := &usageSource{report: func(e budget.UsageEvent) { booked += e.Tokens() }, requests: func() int { return tc.requests }}
			for _, step := range strings.Fields(tc.steps) {
				if step == "door" {
					s.fromDoor(ev(100))
				} else {
					s.fromCLI(ev(10))
				}
			}
			if booked != tc.want {
				t.Errorf("booked %d tokens; want %d", booked, tc.want)
			}
			// The session file's events count as booked only where the
			// CLI is the source (the backends' "usage recovered" notes).
			if got, want := s.fromFile(3), map[bool]int{true: 3, false: 0}[tc.byCLI]; got != want {
				t.Errorf("fromFile(3) = %d; want %d", got, want)
			}
			if note := s.note(); (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
				t.Errorf("note %q; want it to say %q", note, tc.note)
			}
		})
	}
	// No door: the CLI's report is booked whatever comes.
	var booked int64
	s := &usageSource{report: func(e budget.UsageEvent) { booked += e.Tokens() }, source: sourceCLI}
	s.fromCLI(ev(10))
	if booked != 10 || s.note() != "" {
		t.Errorf("no door: booked %d, note %q; want the CLI's 10 and no note", booked, s.note())
	}
}

// Behind the door, the door's replies of a model Purser has no price for
// are counted at the CLI's own dollar figure beyond the door's priced
// replies, once the call is over: reported by the CLI, the figure settles
// them; the CLI's guess (estimated) counts and leaves them unknown. With
// no unpriced reply, the CLI's dollars are a cross-check only.
func TestUsageSourceSettlesUnpricedRepliesAtTheCLIsFigure(t *testing.T) {
	price := func(ev budget.UsageEvent) budget.UsageEvent {
		switch {
		case ev.CostSource == budget.CostReported || ev.CostSource == budget.CostEstimated || ev.Tokens() == 0:
		case ev.Model == "known":
			ev.USD, ev.CostSource = budget.USD(ev.Tokens()), budget.CostEstimated
		default:
			ev.CostSource = budget.CostUnknown
		}
		return ev
	}
	for _, tc := range []struct {
		name    string
		door    []budget.UsageEvent
		cli     budget.UsageEvent // the CLI's final figure
		want    budget.UsageEvent // the settlement booked (zero: none)
		wantSay string
	}{
		{"reported", []budget.UsageEvent{{Model: "known", InputTokens: 100}, {Model: "mystery", InputTokens: 50}},
			budget.UsageEvent{Model: "mystery", USD: 300, CostSource: budget.CostReported},
			budget.UsageEvent{Model: "mystery", USD: 200, CostSource: budget.CostReported, SettlesUnknown: 1}, "reported"},
		{"the CLI's guess", []budget.UsageEvent{{Model: "mystery", InputTokens: 50}, {Model: "mystery", InputTokens: 50}},
			budget.UsageEvent{Model: "mystery", USD: 300, CostSource: budget.CostEstimated},
			budget.UsageEvent{Model: "mystery", USD: 300, CostSource: budget.CostEstimated}, "estimated"},
		{"every reply priced", []budget.UsageEvent{{Model: "known", InputTokens: 100}},
			budget.UsageEvent{Model: "known", USD: 300, CostSource: budget.CostReported}, budget.UsageEvent{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var booked []budget.UsageEvent
			s := &usageSource{report: func(e budget.UsageEvent) { booked = append(booked, e) }, requests: func() int { return 1 }, price: price}
			for _, ev := range tc.door {
				s.fromDoor(ev)
			}
			s.fromCLI(tc.cli)
			booked = booked[:0]
			say := s.settle()
			switch {
			case tc.want == budget.UsageEvent{}:
				if len(booked) != 0 || say != "" {
					t.Fatalf("booked %+v (%q); want nothing", booked, say)
				}
			case len(booked) != 1 || booked[0] != tc.want || !strings.Contains(say, tc.wantSay):
				t.Fatalf("booked %+v (%q); want %+v", booked, say, tc.want)
			}
		})
	}
}

// A door that forwarded requests but read no usage in any reply (error
// replies only, a shape its tap cannot read) leaves the source undecided:
// the CLI's own report, held meanwhile, is booked when the call settles,
// never left at $0; and a door that reports later still wins alone.
func TestUsageSourceUndecidedBooksTheCLIAtTheEnd(t *testing.T) {
	ev := budget.UsageEvent{Model: "m", InputTokens: 550}
	var booked int64
	s := &usageSource{report: func(e budget.UsageEvent) { booked += e.Tokens() }, requests: func() int { return 1 }}
	s.fromCLI(ev)
	s.fromCLI(ev)
	if booked != 0 {
		t.Fatalf("booked %d while undecided; want nothing yet", booked)
	}
	if note := s.settle(); booked != 1100 || !strings.Contains(note, "read no usage") {
		t.Fatalf("settled: booked %d, note %q; want the CLI's 1100, said", booked, note)
	}

	booked = 0
	s = &usageSource{report: func(e budget.UsageEvent) { booked += e.Tokens() }, requests: func() int { return 1 }}
	s.fromCLI(ev)
	s.fromDoor(budget.UsageEvent{Model: "m", InputTokens: 600})
	if s.settle(); booked != 600 {
		t.Fatalf("the door reported after the CLI: booked %d; want the door's 600 alone", booked)
	}
}
