//go:build linux

package sandbox

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// A box bounded to a few processes cannot hold more: a shell that starts
// sleeps until it cannot is refused a fork before the bound (the kernel's
// RLIMIT_NPROC), or, where the kernel exempts the box (root's), the box's
// init ends the box; either way no sleep is left.
func TestProcessesAreBounded(t *testing.T) {
	w := newWorld(t)
	b := w.box
	b.Limits.Processes = 24
	marker := uniqueSleep()
	// The inner shell dies at the first fork refused; the outer one reads
	// how far it got with builtins only, as it cannot fork either. Where
	// nothing refuses a fork, the inner shell then waits (however slow the
	// machine) for the init to see too many processes.
	r := sh(t, b, `sh -c 'for i in $(seq 200); do sleep `+marker+` & echo $i > /tmp/n; done; sleep `+marker+`' 2>/dev/null; read n < /tmp/n; echo "started=$n"`)
	t.Logf("uid %d: exit %d, %s%s", os.Getuid(), r.code, r.stdout, r.stderr)
	started, _ := strconv.Atoi(lines(r.stdout)["started"])
	switch {
	case r.code == exitTooManyProcesses && strings.Contains(r.stderr, "more than the box's limit of 24"):
		// Ended by the init.
	case r.code == 0 && started > 0 && started < 24:
		// Refused by the kernel.
	default:
		t.Errorf("a box bounded to 24 processes: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the box's sleeps to be gone", func() bool { return len(processesWith(marker)) == 0 })
}

// A box's process cannot allocate past the memory bound. Perl (Debian's
// perl-base is essential) allocates, not the test binary, whose race
// detector's own memory would count against the bound under -race.
func TestMemoryIsBounded(t *testing.T) {
	w := newWorld(t)
	b := w.box
	b.Limits.MemoryBytes = 256 << 20
	alloc := func(mib int) result {
		return run(t, b, "perl", "-e", `my $x = "a" x (`+strconv.Itoa(mib)+` * 1024 * 1024); print length($x), "\n"`)
	}
	if r := alloc(64); r.code != 0 || r.stdout != strconv.Itoa(64<<20)+"\n" {
		t.Fatalf("64 MiB under a 256 MiB bound: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := alloc(512); r.code == 0 || r.stdout != "" {
		t.Errorf("512 MiB under a 256 MiB bound: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// The box's /tmp, held in memory, is bounded too.
func TestTmpIsBounded(t *testing.T) {
	w := newWorld(t)
	b := w.box
	b.Limits.TmpBytes = 1 << 20
	r := sh(t, b, `head -c 512K /dev/zero > /tmp/small && echo small=ok; head -c 2M /dev/zero > /tmp/big && echo big=ok; exit 0`)
	got := lines(r.stdout)
	if got["small"] != "ok" || got["big"] == "ok" {
		t.Errorf("a 1 MiB /tmp: %q %q; want 512 KiB written and 2 MiB refused", r.stdout, r.stderr)
	}
}
