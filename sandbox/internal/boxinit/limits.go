//go:build linux

package boxinit

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// startLimited applies the box's limits and starts the command in its own
// process group (the one the init signals). The limits are set, soft and
// hard, on the init itself, and the command inherits them from the fork
// on: lowering them only around the fork would need raising the hard
// limits again, which a box without capabilities cannot, and leaving the
// hard ones high would let the command raise its own. The init needs
// little: its threads are made before the command starts.
//
// A race-detector build (tests only) cannot run under RLIMIT_DATA, so
// there the command's memory bound is set just after it starts, which a
// command quick to fork could outrun; every other build does as above.
func startLimited(c Config, path string, argv []string) (int, error) {
	after, err := setLimits(c)
	if err != nil {
		return 0, err
	}
	return spawn(path, argv, os.Environ(), "", []*os.File{os.Stdin, os.Stdout, os.Stderr}, after)
}

// setLimits sets the box's limits on the init itself, soft and hard, for
// its commands to inherit; it returns those a race-detector build sets on
// each command instead (see startLimited).
func setLimits(c Config) ([]syscall.Rlimit, error) {
	limits := []struct {
		res int
		v   int64
	}{{rlimitNPROC, int64(c.NProc)}, {syscall.RLIMIT_DATA, c.Data}}
	var after []syscall.Rlimit // raceBuild: RLIMIT_DATA, set on the child
	for _, l := range limits {
		if l.v < 0 {
			continue
		}
		r := syscall.Rlimit{Cur: uint64(l.v), Max: uint64(l.v)}
		if raceBuild && l.res == syscall.RLIMIT_DATA {
			after = append(after, r)
			continue
		}
		if err := syscall.Setrlimit(l.res, &r); err != nil {
			return nil, fmt.Errorf("setting limit %d to %d: %w", l.res, l.v, err)
		}
	}
	return after, nil
}

// spawn starts path with argv, env and files (stdin, stdout, stderr) in
// dir ("": the init's own) in a process group of its own, and sets after
// (RLIMIT_DATA) on it.
func spawn(path string, argv, env []string, dir string, files []*os.File, after []syscall.Rlimit) (int, error) {
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	_ = p.Release() // reaped by the init's wait4 loop, not by os.Process
	for i := range after {
		if err := prlimit(pid, syscall.RLIMIT_DATA, &after[i]); err != nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return 0, fmt.Errorf("bounding the command's memory: %w", err)
		}
	}
	return pid, nil
}

// prlimit sets another process's limit (prlimit(2); syscall has no
// wrapper, and golang.org/x/sys/unix initialises late).
func prlimit(pid, resource int, r *syscall.Rlimit) error {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource),
		uintptr(unsafe.Pointer(r)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
