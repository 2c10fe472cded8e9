// Package proc runs an agent CLI as a child in its own process group, reads
// its output line by line as it comes, and stops it the way Purser stops
// every agent: a graceful signal first (the one that still yields usage),
// then the whole group killed after a grace period.
package proc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/purser-dev/purser/redact"
)

// MaxLine is the longest output line passed on; a longer one is dropped as
// garbage.
const MaxLine = 16 << 20

// Command is a child to run.
type Command struct {
	Path  string
	Args  []string
	Dir   string
	Env   []string
	Stdin io.Reader
	// Interrupt is the signal sent to the group when ctx is done;
	// SIGINT when zero.
	Interrupt syscall.Signal
	// Grace is how long the group has after Interrupt before SIGKILL.
	Grace time.Duration
}

// Outcome is how the child ended.
type Outcome struct {
	WaitErr error
	Stderr  string // the last 16 KiB
	Stopped bool   // ctx was done: the child was interrupted, then killed
}

// Run starts c and calls onLine for each line of its stdout until it exits.
// When ctx is done the group is interrupted, then killed after c.Grace.
// Whatever of the group is left when the child exits is killed too.
func Run(ctx context.Context, c Command, onLine func([]byte)) (Outcome, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir, cmd.Env, cmd.Stdin = c.Dir, c.Env, c.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Our own pipes: Wait then returns when the child exits, even if a
	// process that escaped its group still holds them open.
	outR, outW, err := os.Pipe()
	if err != nil {
		return Outcome{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return Outcome{}, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return Outcome{}, fmt.Errorf("start %s: %w", c.Path, err)
	}
	pgid := cmd.Process.Pid
	tracker := newDescendants(pgid)
	running.add(pgid, tracker)
	defer running.remove(pgid)
	watchDone := make(chan struct{})
	go tracker.watch(watchDone)
	sig := c.Interrupt
	if sig == 0 {
		sig = syscall.SIGINT
	}

	var stderr tail
	stderrDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(&stderr, errR)
		close(stderrDone)
	}()
	linesDone := make(chan struct{})
	go func() {
		defer close(linesDone)
		r := bufio.NewReaderSize(outR, 64<<10)
		for {
			line, err := ReadLine(r)
			if len(line) > 0 {
				onLine(line)
			}
			if err != nil {
				return
			}
		}
	}()

	var out Outcome
	var mu sync.Mutex
	exited := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			mu.Lock()
			out.Stopped = true
			mu.Unlock()
			_ = syscall.Kill(-pgid, sig)
			timer := time.NewTimer(c.Grace)
			defer timer.Stop()
			select {
			case <-timer.C:
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				tracker.killAll()
			case <-exited:
			}
		case <-exited:
		}
	}()
	waitErr := cmd.Wait()
	close(exited)
	// Tools the agent left running go with it: its group, and descendants
	// that left the group (setsid) while it ran.
	tracker.scan()
	close(watchDone)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	tracker.killAll()
	waitGone(pgid, time.Second)
	// The output is read to its end, unless something we could not kill
	// still holds the pipe: then it is cut off.
	for _, w := range []struct {
		done <-chan struct{}
		r    *os.File
	}{{linesDone, outR}, {stderrDone, errR}} {
		select {
		case <-w.done:
		case <-time.After(time.Second):
			w.r.Close()
			<-w.done
		}
		w.r.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	out.WaitErr, out.Stderr = waitErr, stderr.String()
	return out, nil
}

// groups are the process groups of the children running now, with their
// descendants, so that Purser can kill them all when it must quit at once.
type groups struct {
	mu sync.Mutex
	m  map[int]*descendants
}

var running = &groups{m: map[int]*descendants{}}

func (g *groups) add(pgid int, d *descendants) {
	g.mu.Lock()
	g.m[pgid] = d
	g.mu.Unlock()
}

func (g *groups) remove(pgid int) {
	g.mu.Lock()
	delete(g.m, pgid)
	g.mu.Unlock()
}

// KillAll kills every child Run has running, with its group and every
// descendant seen, at once. Purser calls it when it must quit without the
// graceful stop (a second signal), so that no agent outlives it.
func KillAll() {
	running.mu.Lock()
	defer running.mu.Unlock()
	for pgid, d := range running.m {
		d.scan()
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		d.killAll()
	}
}

// ReadLine reads one line of any length; a line longer than MaxLine comes
// back empty.
func ReadLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, isPrefix, err := r.ReadLine()
		if !tooLong && len(line)+len(chunk) <= MaxLine {
			line = append(line, chunk...)
		} else {
			tooLong, line = true, nil
		}
		if err != nil || !isPrefix {
			return line, err
		}
	}
}

// tail keeps the last 16 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 16<<10; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// LastLines returns the last n lines of s on one line, secrets masked: it
// is how an agent's stderr gets into an error.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return redact.String(strings.Join(lines, " | "))
}

// waitGone waits until no live process is left in the group, or for at
// most d. Zombies do not count: they hold nothing and do nothing, and an
// orphan's zombie waits for whoever reaps it.
func waitGone(pgid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(pid); len(f) > 3 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// descendants remembers every process seen below a root while it runs, with
// its start time, so that one that left the process group can still be
// killed, and a reused pid never is.
type descendants struct {
	root int
	mu   sync.Mutex
	seen map[int]string // pid → start time (field 22 of /proc/pid/stat)
}

func newDescendants(root int) *descendants { return &descendants{root: root, seen: map[int]string{}} }

const watchEvery = 50 * time.Millisecond

func (d *descendants) watch(done <-chan struct{}) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		d.scan()
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// scan walks /proc once and records the root's descendants.
func (d *descendants) scan() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	parent := map[int]int{}
	start := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, st, ok := stat(pid)
		if ok {
			parent[pid], start[pid] = ppid, st
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for pid := range parent {
		for p, hops := parent[pid], 0; p != 0 && hops < 64; p, hops = parent[p], hops+1 {
			if p == d.root {
				d.seen[pid] = start[pid]
				break
			}
		}
	}
}

// statFields returns the fields of /proc/pid/stat after the command name:
// state, ppid, pgrp, …; nil when the process is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The command name is in parentheses and may hold spaces: parse after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// stat reads a process's parent and start time from /proc/pid/stat.
func stat(pid int) (ppid int, start string, ok bool) {
	f := statFields(pid)
	if len(f) < 20 {
		return 0, "", false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, f[19], err == nil
}

// killAll kills every recorded descendant that is still the same process.
func (d *descendants) killAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for pid, st := range d.seen {
		if _, now, ok := stat(pid); ok && now == st {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
