package validate_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/validate"
)

// A validator cannot reach into the resident box's init: not its
// descriptors under /proc/1 (the wire to Purser among them), not by
// ptrace — the init is not dumpable — so what the init kills between runs
// and what it replies stay its own.
func TestResidentBoxInitIsOutOfTheValidatorsReach(t *testing.T) {
	r := boxedRunner(t)
	ws := t.TempDir()
	res := run(t, r, ws, `if readlink /proc/1/fd/0 >/dev/null 2>&1 || readlink /proc/1/cwd >/dev/null 2>&1; then echo FDS-READ; fi; `+
		`if [ -r /proc/1/environ ] && cat /proc/1/environ >/dev/null 2>&1; then echo ENV-READ; fi; echo done`)
	if strings.Contains(res.Output, "FDS-READ") || strings.Contains(res.Output, "ENV-READ") || !strings.Contains(res.Output, "done") {
		t.Fatalf("a validator read the box init's /proc files:\n%s", res.Output)
	}
	if _, err := exec.LookPath("strace"); err == nil {
		res := run(t, r, ws, `if strace -p 1 -e trace=none -o /dev/null & p=$!; sleep 0.5; kill $p 2>/dev/null; wait $p; then echo TRACED; fi; echo done`)
		if strings.Contains(res.Output, "TRACED") {
			t.Fatalf("a validator traced the box's init:\n%s", res.Output)
		}
	}
}

// A validator signalling the box's init (kill -TERM 1, as a script killing
// "its parent" might) neither ends the box nor loses the run's result.
func TestResidentBoxInitIgnoresTheValidatorsSignals(t *testing.T) {
	r := boxedRunner(t)
	ws := t.TempDir()
	res := run(t, r, ws, `for s in TERM INT HUP QUIT USR1; do kill -$s 1; done; sleep 0.2; echo after`)
	if !strings.Contains(res.Output, "after") {
		t.Fatalf("output: %q", res.Output)
	}
	box := oneIdleBox(t)
	run(t, r, ws, "true")
	if again := oneIdleBox(t); again != box {
		t.Fatalf("the box was replaced (%d, then %d) after its init was signalled", box, again)
	}
}

// What a run leaves in the box beyond its processes and /tmp does not reach
// the next run: /dev/shm is emptied, and a box left with a System V IPC
// object or a new name in /dev is replaced. A directory the run made
// unreadable in /tmp is emptied too, quietly, the box kept.
func TestResidentBoxLeavesNoStateToTheNextRun(t *testing.T) {
	r := boxedRunner(t)
	ws := t.TempDir()
	run(t, r, ws, "echo x > /dev/shm/leak && mkdir -p /tmp/d/e && touch /tmp/d/e/f && chmod 0 /tmp/d/e /tmp/d")
	box := oneIdleBox(t)
	res := run(t, r, ws, `if [ -e /dev/shm/leak ]; then echo SHM-KEPT; fi; if [ -e /tmp/d ]; then echo TMP-KEPT; fi; echo done`)
	if strings.Contains(res.Output, "KEPT") || strings.Contains(res.Output, "purser box") {
		t.Fatalf("the second run saw the first's state:\n%s", res.Output)
	}
	if again := oneIdleBox(t); again != box {
		t.Fatalf("the box was replaced (%d, then %d) for what it could empty", box, again)
	}
	run(t, r, ws, "echo x > /dev/leak")
	if idle := validate.IdleBoxes(); len(idle) != 0 {
		t.Fatalf("the box %d that a run left /dev/leak in is kept for the next: %v", box, idle)
	}
	if res := run(t, r, ws, "if [ -e /dev/leak ]; then echo DEV-KEPT; fi"); strings.Contains(res.Output, "DEV-KEPT") {
		t.Fatalf("the next run sees /dev/leak")
	}
	if _, err := exec.LookPath("ipcmk"); err == nil {
		run(t, r, ws, "ipcmk -M 4096 >/dev/null")
		if idle := validate.IdleBoxes(); len(idle) != 0 {
			t.Fatalf("the box that a run left a shared memory segment in is kept for the next: %v", idle)
		}
		res := run(t, r, ws, "ipcs -m")
		if strings.Contains(res.Output, "4096") {
			t.Fatalf("the next run sees the segment:\n%s", res.Output)
		}
	}
}

// A box's start counts against the validator's timeout: a validator whose
// time is up while its box starts ends then, timed out, not after the
// start's own minute.
func TestResidentBoxStartHonoursTheValidatorsTimeout(t *testing.T) {
	r := boxedRunner(t)
	start := time.Now()
	res := r.RunValidator(context.Background(), t.TempDir(), purser.Validator{Name: "v", Run: "true", Timeout: time.Nanosecond})
	if res.Passed || !res.TimedOut {
		t.Fatalf("a validator with no time passed or did not time out: %+v", res)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("a validator with no time took %s", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res := r.RunValidator(ctx, t.TempDir(), purser.Validator{Name: "v", Run: "true"}); res.Passed {
		t.Fatalf("a cancelled validator passed: %+v", res)
	}
	if res := r.RunValidator(context.Background(), t.TempDir(), purser.Validator{Name: "v", Run: "true"}); !res.Passed {
		t.Fatalf("after a start cut short, the next validator failed: %+v", res)
	}
}

// A descriptor Purser inherited without close-on-exec (from whatever
// started it) does not reach a boxed validator: it gets stdin, stdout and
// stderr, and what its own shell opens.
func TestBoxedValidatorGetsNoInheritedDescriptor(t *testing.T) {
	r := boxedRunner(t)
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	defer wr.Close()
	fd := int(wr.Fd()) // Fd leaves it blocking; clear close-on-exec as an inherited one has it clear
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0); errno != 0 {
		t.Fatal(errno)
	}
	res := run(t, r, t.TempDir(), fmt.Sprintf(`if [ -e /proc/self/fd/%d ]; then echo INHERITED; fi; echo done`, fd))
	if strings.Contains(res.Output, "INHERITED") || !strings.Contains(res.Output, "done") {
		t.Fatalf("descriptor %d reached the validator:\n%s", fd, res.Output)
	}
}
