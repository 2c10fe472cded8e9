package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
)

// ErrUnavailable is wrapped by every error that says no box can be made on
// this machine, so that callers can tell it from a box described wrongly
// and refuse to run (or run unboxed where the user said `sandbox: off`).
var ErrUnavailable = errors.New("sandbox unavailable")

// probe caches Available's answer: whether this machine can make a box does
// not change while Purser runs, and the probe starts a process.
var probe struct {
	once  sync.Once
	bwrap string // bwrap's path, found once
	err   error
}

// Available returns nil when a box can be made here, else an error that
// wraps ErrUnavailable and says why and what to do. It tries once, by
// making an empty box, and remembers the answer.
func Available() error {
	probe.once.Do(func() { probe.bwrap, probe.err = available() })
	return probe.err
}

// available makes an empty box and returns the path of the bwrap that
// made it.
func available() (string, error) {
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("%w: no sandbox on %s (Purser's box needs Linux namespaces); use `sandbox: off` to run unboxed, knowingly", ErrUnavailable, runtime.GOOS)
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("%w: bwrap not found: install bubblewrap (Debian: apt-get install bubblewrap), or use `sandbox: off` to run unboxed, knowingly", ErrUnavailable)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
		"--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--proc", "/proc", "--", "true")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: bubblewrap could not make a box (%v: %s); Purser needs bubblewrap 0.8 or later, and %s", ErrUnavailable, err, strings.TrimSpace(stderr.String()), userNamespaceHint())
	}
	return bwrap, nil
}

// userNamespaceHint says which kernel settings keep an unprivileged user
// from creating user namespaces, with their values here where readable.
func userNamespaceHint() string {
	hint := "user namespaces enabled; check"
	for _, s := range []struct{ file, want string }{
		{"/proc/sys/user/max_user_namespaces", "above 0"},
		{"/proc/sys/kernel/unprivileged_userns_clone", "1 (Debian)"},
		{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "0, or an AppArmor profile for bwrap (Ubuntu 24.04+)"},
	} {
		v, err := os.ReadFile(s.file)
		if err != nil {
			continue
		}
		name := strings.ReplaceAll(strings.TrimPrefix(s.file, "/proc/sys/"), "/", ".")
		hint += fmt.Sprintf(" sysctl %s=%s (wants %s);", name, strings.TrimSpace(string(v)), s.want)
	}
	return strings.TrimSuffix(hint, ";") + "; or use `sandbox: off` to run unboxed, knowingly"
}
