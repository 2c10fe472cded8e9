package reswire_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/purser-dev/purser/internal/reswire"
)

func TestARequestReadsBackAsWritten(t *testing.T) {
	p, err := reswire.Request("/ws", []string{"sh", "-c", "true"}, []string{"A=1", "PATH=/bin"})
	if err != nil || p[0] != reswire.MsgRun {
		t.Fatalf("Request = %q, %v", p, err)
	}
	dir, argv, env, err := reswire.ParseRequest(p[1:])
	if err != nil || dir != "/ws" || !slices.Equal(argv, []string{"sh", "-c", "true"}) || !slices.Equal(env, []string{"A=1", "PATH=/bin"}) {
		t.Fatalf("ParseRequest = %q %q %q %v", dir, argv, env, err)
	}
	if got := reswire.EnvPath(env); got != "/bin" {
		t.Errorf("EnvPath = %q", got)
	}
	if _, err := reswire.Request("/ws", []string{"a\x00b"}, nil); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("a NUL byte: %v", err)
	}
	if _, err := reswire.Request("/ws", []string{"sh"}, []string{strings.Repeat("x", reswire.MaxRequest)}); err == nil {
		t.Error("a request past MaxRequest was accepted")
	}
}

func TestAReplyReadsBackAsWritten(t *testing.T) {
	for _, c := range []struct {
		status  int
		discard bool
	}{{0, false}, {137, true}} {
		s, d, err := reswire.ParseReply(reswire.Reply(c.status, c.discard))
		if err != nil || s != c.status || d != c.discard {
			t.Errorf("reply %v: %d %v %v", c, s, d, err)
		}
	}
	for _, bad := range []string{"", "x", "-1", " discard"} {
		if _, _, err := reswire.ParseReply([]byte(bad)); err == nil {
			t.Errorf("ParseReply(%q) accepted", bad)
		}
	}
}
