// Package procgroup starts a child as the leader of its own process group
// and ends it the one way Purser ends every child it runs — agents and
// validators alike: a signal to the whole group, SIGKILL after a grace
// period, and, once the leader is gone, whatever it left behind, descendants
// that left the group (setsid) included. It knows processes only, so the
// backends' runner and the validators both build on it.
package procgroup

import (
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/purser-dev/purser/internal/procgroup/supervisor"
)

// Group is a started child leading its own process group, with its
// descendants watched while it runs.
type Group struct {
	pgid      int
	start     string   // the leader's start time (Stat), "" when unknown
	lifeline  *os.File // the supervisor's lifeline; nil when unsupervised
	contained bool     // the child holds its descendants itself (StartContained)
	resident  bool     // a resident supervisor (StartResident)
	seen      *descendants
	watchDone chan struct{}
	endOnce   sync.Once
}

// Start starts cmd as the leader of a new process group and begins watching
// its descendants. cmd must not be started yet; its SysProcAttr is set.
// Once Supervise has enabled it, cmd runs under a supervisor that leads
// the group and kills everything below it if this process dies; Wait then
// reports the supervisor's exit, which is the child's.
func Start(cmd *exec.Cmd) (*Group, error) {
	prepare(cmd)
	lifeline, err := wrap(cmd)
	if err != nil {
		return nil, err
	}
	err = startLocked(cmd)
	if lifeline != nil {
		// Our copy of the read end goes: only the supervisor holds it.
		cmd.ExtraFiles[len(cmd.ExtraFiles)-1].Close()
	}
	if err != nil {
		if lifeline != nil {
			lifeline.Close()
		}
		return nil, err
	}
	g := started(cmd, lifeline, false, false)
	if lifeline == nil {
		// Unsupervised, a descendant that leaves the group and is
		// orphaned goes to init: only watching all of /proc while the
		// child runs remembers it. A supervisor is its subreaper instead,
		// so its tree is read when stopping, never watched.
		go g.seen.watch(g.watchDone)
	}
	return g, nil
}

// StartContained starts cmd as the leader of a new process group, like
// Start, for a child that holds every process it starts by itself and
// dies with this process: a sandbox box, whose bwrap (--die-with-parent)
// is killed with this process's thread that started it and takes its pid
// namespace — the box's every process, a setsid double fork's included —
// with it. Such a child needs no supervisor and no watch (what the
// supervisor would add, the box already does), so none is started, even
// when Supervise has enabled them: a box costs bwrap and its init, not a
// third process. Ending the group kills its leader, and the box with it.
func StartContained(cmd *exec.Cmd) (*Group, error) {
	prepare(cmd)
	// Should this process die before bwrap has set its own death signal.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := startLocked(cmd); err != nil {
		return nil, err
	}
	return started(cmd, nil, true, false), nil
}

// prepare makes cmd the leader of a process group of its own.
func prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// started registers the Group of cmd, just started.
func started(cmd *exec.Cmd, lifeline *os.File, contained, resident bool) *Group {
	g := &Group{pgid: cmd.Process.Pid, lifeline: lifeline, contained: contained, resident: resident,
		seen: newDescendants(cmd.Process.Pid), watchDone: make(chan struct{})}
	if p, ok := Stat(g.pgid); ok {
		g.start = p.Start
	}
	running.add(g)
	return g
}

// running are the groups started and not yet ended, so that KillAll can
// end them all when Purser must quit at once.
var running = &registry{groups: map[*Group]bool{}}

type registry struct {
	mu     sync.Mutex
	groups map[*Group]bool
}

func (r *registry) add(g *Group) {
	r.mu.Lock()
	r.groups[g] = true
	r.mu.Unlock()
}

func (r *registry) remove(g *Group) {
	r.mu.Lock()
	delete(r.groups, g)
	r.mu.Unlock()
}

// KillAll kills every group started and not yet ended, with every
// descendant seen: for a process about to exit at once, so that nothing it
// started outlives it.
func KillAll() {
	running.mu.Lock()
	defer running.mu.Unlock()
	for g := range running.groups {
		if g.watched() {
			g.seen.scan()
		}
		g.kill()
	}
}

// Stop asks the group to end with sig, then, unless exited (closed once the
// leader has been waited for) is closed within grace, kills the group and
// every descendant seen. It returns when either has happened.
//
// A contained group (StartContained) is killed at once: its leader, bwrap,
// forwards no signal — one ends the box unwarned anyway — and a signal
// that killed it before the box's own process is set to die with it would
// leave that process behind.
func (g *Group) Stop(sig syscall.Signal, grace time.Duration, exited <-chan struct{}) {
	if g.contained {
		g.kill()
		return
	}
	_ = syscall.Kill(-g.pgid, sig)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-timer.C:
		g.kill()
	case <-exited:
	}
}

// End kills what is left of the group once its leader has been waited for —
// the tools it left running, and descendants that left the group while it
// ran — waits up to a second for them to be gone, and stops watching. It is
// safe to call more than once.
func (g *Group) End() {
	g.endOnce.Do(func() {
		defer running.remove(g)
		if g.watched() {
			g.seen.scan()
		}
		close(g.watchDone)
		g.kill()
		if g.lifeline != nil {
			g.lifeline.Close()
		}
		waitGone(g.pgid, time.Second)
	})
}

// watched is whether the group's descendants are found by watching /proc:
// neither a supervisor's tree nor a box holds them.
func (g *Group) watched() bool { return g.lifeline == nil && !g.contained }

func (g *Group) kill() {
	if g.lifeline != nil || g.contained {
		g.killBelow()
		return
	}
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	g.seen.killAll()
}

// killBelow kills a supervised or contained group: first everything below
// its leader, read from the leader's tree while it lives, then the group
// with the leader. A supervisor is the subreaper of what is below it, so
// orphans stay in that tree and the next read finds what forked meanwhile;
// it killed what was below it itself if it already exited, unless it was
// killed: then what left the group is past reach here, as it would be for
// any killed supervisor, and KillLeftovers finds it by its mark. Below a
// box's bwrap is the box's first process, which takes the box with it, and
// which bwrap's death kills only once the box is set up: killed first, it
// never outlives a box stopped while starting.
func (g *Group) killBelow() {
	if p, ok := Stat(g.pgid); g.resident && ok && p.State != "Z" && p.Start == g.start {
		// Stopped first, a resident supervisor cannot report its command
		// killed as a run that ended, which would let Purser carry on
		// (write a task's end) while it is being killed to quit at once.
		_ = syscall.Kill(g.pgid, syscall.SIGSTOP)
	}
	for i := 0; i < 100; i++ {
		if p, ok := Stat(g.pgid); !ok || p.State == "Z" || p.Start != g.start {
			break
		}
		live := 0
		for pid, st := range supervisor.Tree(g.pgid) {
			if p, ok := Stat(pid); ok && p.State != "Z" && p.Start == st {
				live++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if live == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
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
		if p, ok := Stat(pid); ok && p.State != "Z" && p.PGID == pgid {
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
	below := supervisor.Below(d.root)
	d.mu.Lock()
	defer d.mu.Unlock()
	for pid, st := range below {
		d.seen[pid] = st
	}
}

// Process is what /proc/pid/stat says of a process.
type Process = supervisor.Process

// Stat reads /proc/pid/stat; ok is false when the process is gone or its
// stat cannot be read.
func Stat(pid int) (Process, bool) { return supervisor.Stat(pid) }

// killAll kills every recorded descendant that is still the same process.
func (d *descendants) killAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for pid, st := range d.seen {
		if p, ok := Stat(pid); ok && p.Start == st {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// PGID is the group's id: the pid of its leader (the supervisor, when
// supervised).
func (g *Group) PGID() int { return g.pgid }
