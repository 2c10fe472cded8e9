package openai

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readEvents reads server-sent events as the spec says: data lines joined
// by newlines, CRLF line ends, comments (of any length) and other fields
// skipped, an event dispatched only at its blank line.
func TestReadEventsFollowsTheEventStreamFormat(t *testing.T) {
	stream := ": keep-alive\r\n" +
		": " + strings.Repeat("x", 200<<10) + "\n" +
		"event: chunk\nid: 7\ndata: {\"a\":\ndata:1}\r\n\r\n" +
		"data:no space\n\n" +
		"retry: 10\n\n" + // no data: no event
		"data: [DONE]\n\n" +
		"data: after done\n\n"
	var got []string
	err := readEvents(iotest.OneByteReader(strings.NewReader(stream)), func(data []byte) (bool, error) {
		got = append(got, string(data))
		return string(data) != "[DONE]", nil
	})
	want := []string{"{\"a\":\n1}", "no space", "[DONE]"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, err %v; want %q", got, err, want)
	}
}

// A stream cut in the middle is an error; one that ends after its last
// event is not, and an event without its blank line is dropped.
func TestReadEventsEnds(t *testing.T) {
	var got []string
	onData := func(data []byte) (bool, error) { got = append(got, string(data)); return true, nil }
	if err := readEvents(strings.NewReader("data: 1\n\ndata: 2"), onData); err != nil || len(got) != 1 {
		t.Fatalf("clean end: events %q, err %v; want one event, no error", got, err)
	}
	cut := io.MultiReader(strings.NewReader("data: 1\n\ndata: {\"cho"), iotest.ErrReader(io.ErrUnexpectedEOF))
	if err := readEvents(cut, onData); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut stream: err %v, want io.ErrUnexpectedEOF", err)
	}
}

// A data line longer than maxEventBytes is refused, not held.
func TestReadEventsRefusesAHugeDataLine(t *testing.T) {
	huge := io.MultiReader(strings.NewReader("data: "), strings.NewReader(strings.Repeat("x", maxEventBytes+1)), strings.NewReader("\n\n"))
	err := readEvents(huge, func([]byte) (bool, error) { t.Fatal("a huge line was passed on"); return false, nil })
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("err %v, want the line refused", err)
	}
}
