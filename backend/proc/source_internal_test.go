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
	}{
		{"the door first", 1, "door cli door cli", 200, "the CLI's own report said 20 tokens"},
		{"the CLI after a request reached the door, before its reply was booked", 1, "cli door", 100, "the CLI's own report said 10 tokens"},
		{"the CLI before any request reached the door", 0, "cli door cli", 20, "usage booked from the CLI's own report"},
		{"the door alone", 1, "door door", 200, "the CLI reported none"},
		{"the CLI alone", 0, "cli cli", 20, ""},
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
