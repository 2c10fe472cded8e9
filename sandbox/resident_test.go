//go:build linux

package sandbox

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// A resident box's init gets the socket after the lifeline and no command;
// a resident box given a command, or a box given neither, is refused.
func TestBwrapArgsOfAResidentBox(t *testing.T) {
	b := testBox()
	b.Door = nil
	b.Lifeline, b.Serve = os.Stdin, os.Stdout // only their presence counts here
	args, err := b.bwrapArgs(testLayout, "/usr/local/bin/purser", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	tail := args[slices.Index(args, initArg)-1:]
	if want := []string{initPath, initArg, "lifeline=3", "serve=4", "nproc=64", "data=17179869184"}; !slices.Equal(tail, want) {
		t.Errorf("the init's arguments: %q, want %q", tail, want)
	}
	if _, err := b.bwrapArgs(testLayout, "/usr/local/bin/purser", "sh", nil); err == nil {
		t.Error("a resident box given a command was accepted")
	}
	b.Serve = nil
	if _, err := b.bwrapArgs(testLayout, "/usr/local/bin/purser", "", nil); err == nil {
		t.Error("a box with neither a command nor a socket was accepted")
	}
}

// The wire's request and reply, as the init reads and writes them.
func TestResidentRequestAndReply(t *testing.T) {
	p, err := ResidentRequest("/ws", []string{"sh", "-c", "exit 3"}, []string{"A=1"})
	if err != nil || string(p) != "R/ws\x003\x00sh\x00-c\x00exit 3\x00A=1\x00" {
		t.Fatalf("ResidentRequest = %q, %v", p, err)
	}
	for _, bad := range [][]string{{}, {"a\x00b"}, {"sh", strings.Repeat("x", 70<<10)}} {
		if _, err := ResidentRequest("/ws", bad, nil); err == nil {
			t.Errorf("ResidentRequest(%.20q) accepted", bad)
		}
	}
	for in, want := range map[string]struct {
		status  int
		discard bool
	}{"0": {0, false}, "137": {137, false}, "125 discard": {125, true}} {
		s, d, err := ParseResidentReply([]byte(in))
		if err != nil || s != want.status || d != want.discard {
			t.Errorf("ParseResidentReply(%q) = %d %v %v", in, s, d, err)
		}
	}
	for _, bad := range []string{"", "started", "-1", "1 later"} {
		if _, _, err := ParseResidentReply([]byte(bad)); err == nil {
			t.Errorf("ParseResidentReply(%q) accepted", bad)
		}
	}
}
