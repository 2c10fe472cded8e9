package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/internal/reswire"
	"github.com/purser-dev/purser/sandbox"
)

// failedFor is how long the validators of a key whose runner could not
// start run the per-run way before a resident runner is tried again (a
// workspace missing for a moment, a box slow to start on a loaded machine).
const failedFor = time.Minute

// boxes are the resident runners of this process — boxes, and the
// supervisors of unboxed validators — by what makes one.
var boxes = &pool{idle: map[string][]*resident{}, busy: map[*resident]bool{}, failed: map[string]time.Time{}}

// pool holds the resident runners (boxes, supervisors) not running a
// validator, by key, and remembers the keys whose runner could not start
// (they run per validator, as before resident runners, for failedFor).
type pool struct {
	mu      sync.Mutex
	idle    map[string][]*resident
	busy    map[*resident]bool   // running a validator; true: to be closed after it
	failed  map[string]time.Time // when a runner of the key last failed to start
	closing sync.WaitGroup       // closes under way
	said    sync.Once            // that boxes could not be made resident
	// saidUnboxed: that an unboxed validator's supervisor could not be
	// made resident.
	saidUnboxed sync.Once
}

// Close ends every resident box and supervisor not running a validator
// (one running a validator ends when it has run it) and waits for them:
// for a process about to exit, and for a measure that counts their CPU (a
// resident runner's is counted in this process's children's only once it
// has been waited for). Resident runners end with Purser anyway — with
// their lifelines, even when it is killed — and a later validator starts a
// new one.
func Close() {
	boxes.mu.Lock()
	var all []*resident
	for key, rs := range boxes.idle {
		all = append(all, rs...)
		delete(boxes.idle, key)
	}
	for _, rn := range all {
		boxes.closeLocked(rn)
	}
	for rn := range boxes.busy {
		boxes.busy[rn] = true
	}
	boxes.mu.Unlock()
	boxes.closing.Wait()
}

// closeLocked closes rn in the background; Close waits for it.
func (p *pool) closeLocked(rn *resident) {
	p.closing.Add(1)
	go func() {
		defer p.closing.Done()
		rn.close()
	}()
}

// take returns an idle runner of key whose workspace is still the one
// it was started for, or starts one with start.
func (p *pool) take(key, workspace string, start func() (*resident, error)) (*resident, error) {
	ws, err := identify(workspace)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	for rs := p.idle[key]; len(rs) > 0; rs = p.idle[key] {
		rn := rs[len(rs)-1]
		p.idle[key] = rs[:len(rs)-1]
		if rn.ws == ws && rn.alive() {
			p.busy[rn] = false
			p.mu.Unlock()
			return rn, nil
		}
		p.closeLocked(rn) // the workspace was made again (a new box sees it), or the runner is gone
	}
	delete(p.idle, key)
	p.mu.Unlock()
	rn, err := start()
	if err == nil {
		p.mu.Lock()
		p.busy[rn] = false
		p.mu.Unlock()
	}
	return rn, err
}

// put gives rn back after a run: to the idle set, to be closed after
// idleTimeout unused; or closed at once when it broke or Close was called
// while it ran.
func (p *pool) put(rn *resident) {
	p.mu.Lock()
	defer p.mu.Unlock()
	closeAfter := p.busy[rn]
	delete(p.busy, rn)
	if rn.broken.Load() || closeAfter || !rn.alive() {
		p.closeLocked(rn)
		return
	}
	rn.gen++
	gen := rn.gen
	p.idle[rn.key] = append(p.idle[rn.key], rn)
	time.AfterFunc(idleTimeout, func() { p.expire(rn, gen) })
}

// expire closes rn if it has stayed idle since its return gen.
func (p *pool) expire(rn *resident, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.idle[rn.key]
	for i, r := range rs {
		if r == rn && rn.gen == gen {
			p.idle[rn.key] = append(rs[:i:i], rs[i+1:]...)
			if len(p.idle[rn.key]) == 0 {
				delete(p.idle, rn.key)
			}
			p.closeLocked(rn)
			return
		}
	}
}

// boxOf describes the box of workspace's validators, and its key: what
// makes the box, so that a box is only ever reused for the same one.
func (s *Sandbox) boxOf(workspace string) (sandbox.Box, string, error) {
	home, err := s.home(workspace)
	if err != nil {
		return sandbox.Box{}, "", err
	}
	b := sandbox.Box{Workspace: filepath.Clean(workspace), Home: home, ReadOnly: s.ReadOnly,
		Env: sandbox.EnvAllowList(os.Environ(), s.Env...), Limits: s.Limits, Allow: s.Allow}
	var k strings.Builder
	for _, f := range []string{b.Workspace, b.Home, strconv.Itoa(b.Limits.Processes),
		strconv.FormatInt(b.Limits.MemoryBytes, 10), strconv.FormatInt(b.Limits.TmpBytes, 10)} {
		k.WriteString(strconv.Quote(f))
	}
	for _, list := range [][]string{b.ReadOnly, b.Allow, b.Environ()} {
		k.WriteByte('|')
		for _, f := range list {
			k.WriteString(strconv.Quote(f))
		}
	}
	return b, k.String(), nil
}

// ran is how a validator's run in a resident box went.
type ran struct {
	status  int   // as a shell gives it; -1 when the box broke
	stopped bool  // the context ended it
	err     error // the box broke
}

// runResident runs script in a resident box for workspace, its output to
// out. ok is false when no resident box could be started for it: the
// caller runs it as before, in a box of its own (said once per process).
func (r Runner) runResident(ctx context.Context, workspace, script string, out io.Writer) (res ran, ok bool) {
	b, key, err := r.Sandbox.boxOf(workspace)
	if err != nil {
		return ran{}, false // the box of its own says why
	}
	req, err := sandbox.ResidentRequest(b.Workspace, []string{"sh", "-c", script}, b.Environ())
	if err != nil {
		return ran{}, false // too large an environment: a box of its own takes it
	}
	return boxes.run(ctx, "box", key, b.Workspace, req, out, func() (*resident, error) { return startResident(ctx, key, b) })
}

// runSupervised runs script unboxed in workspace under a resident
// supervisor, with Purser's environment, its output to out. ok is false
// when supervision is off (procgroup.Supervise) or none could be
// started: the caller runs it as before, under a supervisor of its own
// when supervised (a failure to start is said once per process).
func runSupervised(ctx context.Context, workspace, script string, out io.Writer) (res ran, ok bool) {
	if !procgroup.Supervised() {
		return ran{}, false // children run unsupervised: so does this one
	}
	env := os.Environ()
	req, err := reswire.Request(workspace, []string{"sh", "-c", script}, env)
	if err != nil {
		return ran{}, false // too large an environment: a supervisor of its own takes it
	}
	var k strings.Builder
	k.WriteString("unboxed|")
	k.WriteString(strconv.Quote(workspace))
	for _, e := range env {
		k.WriteString(strconv.Quote(e)) // GraceEnv and PATH among them: what makes the supervisor
	}
	key := k.String()
	return boxes.run(ctx, "supervisor", key, workspace, req, out, func() (*resident, error) { return startSupervisor(ctx, key, workspace) })
}

// run runs req on a resident runner of kind and key for workspace (one taken from
// the idle set, or started with start), its output to out. ok is false
// when none could be started: the caller runs it the per-run way.
func (p *pool) run(ctx context.Context, kind, key, workspace string, req []byte, out io.Writer, start func() (*resident, error)) (res ran, ok bool) {
	p.mu.Lock()
	failed, ok := p.failed[key]
	p.mu.Unlock()
	if ok && time.Since(failed) < failedFor {
		return ran{}, false
	}
	for try := 0; ; try++ {
		rn, err := p.take(key, workspace, start)
		if err != nil {
			if ctx.Err() == nil { // the validator's end cut the start short: not the runner's failure
				p.mu.Lock()
				p.failed[key] = time.Now()
				p.mu.Unlock()
				p.sayFailed(kind, err)
			}
			return ran{}, false
		}
		res.status, res.stopped, res.err = rn.run(ctx, req, out)
		p.put(rn)
		if errors.Is(res.err, errNotSent) && try == 0 && ctx.Err() == nil {
			continue // it never ran: a fresh runner runs it
		}
		return res, true
	}
}

// sayFailed says, once per process and kind of runner, that validators
// run the per-run way, and why.
func (p *pool) sayFailed(kind string, err error) {
	switch kind {
	case "supervisor":
		p.saidUnboxed.Do(func() {
			fmt.Fprintf(os.Stderr, "purser: unboxed validators run under a supervisor each, not a resident one: %v\n", err)
		})
	default:
		p.said.Do(func() {
			fmt.Fprintf(os.Stderr, "purser: validators run in a box each, not a resident one: %v\n", err)
		})
	}
}
