package proc_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/proc"
)

func TestOwnersTellALiveProcessFromAGoneOne(t *testing.T) {
	var o proc.Owners
	self := o.Self()
	if f := strings.Fields(self); len(f) != 3 || f[2] == "" {
		t.Fatalf("Self() = %q, want \"host pid start\"", self)
	}
	if o.Gone(self) {
		t.Errorf("Gone(Self()) = true for this live process")
	}

	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	f := strings.Fields(self)
	cases := []struct {
		name  string
		owner string
		gone  bool
	}{
		{"a process that exited", fmt.Sprintf("%s %d %s", host, cmd.Process.Pid, f[2]), true},
		{"this pid with another start time (pid reused)", fmt.Sprintf("%s %d 1", host, os.Getpid()), true},
		{"another host is never known to be gone", fmt.Sprintf("elsewhere %d %s", os.Getpid()+1, f[2]), false},
		{"an unreadable owner", "garbage", true},
		{"no owner", "", false},
	}
	for _, c := range cases {
		if got := o.Gone(c.owner); got != c.gone {
			t.Errorf("%s: Gone(%q) = %v, want %v", c.name, c.owner, got, c.gone)
		}
	}
}
