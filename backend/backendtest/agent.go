package backendtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

// Usage is an amount of usage in Purser's shape: Input counts every prompt
// token, the cached ones (CacheRead, CacheWrite) included.
type Usage struct {
	Input      int64
	CacheRead  int64
	CacheWrite int64
	Output     int64
	// USD is what the provider says the usage cost, for the dialects that
	// report dollars.
	USD budget.USD
}

// Tokens is Input plus Output, what the token metric counts.
func (u Usage) Tokens() int64 { return u.Input + u.Output }

// Plus returns u and v added field by field.
func (u Usage) Plus(v Usage) Usage {
	return Usage{Input: u.Input + v.Input, CacheRead: u.CacheRead + v.CacheRead, CacheWrite: u.CacheWrite + v.CacheWrite,
		Output: u.Output + v.Output, USD: u.USD + v.USD}
}

// atLeast returns the field-by-field maximum of u and v.
func (u Usage) atLeast(v Usage) Usage {
	return Usage{Input: max(u.Input, v.Input), CacheRead: max(u.CacheRead, v.CacheRead), CacheWrite: max(u.CacheWrite, v.CacheWrite),
		Output: max(u.Output, v.Output), USD: max(u.USD, v.USD)}
}

func (u Usage) String() string {
	return fmt.Sprintf("%d in (%d cache read, %d cache write), %d out, %s", u.Input, u.CacheRead, u.CacheWrite, u.Output, u.USD)
}

// Ending is how a scripted run ends.
type Ending int

// The endings a Script can have.
const (
	// EndSuccess: the run completes and says so, with its totals.
	EndSuccess Ending = iota
	// EndFailure: the run fails with a message (holding Script.Secret),
	// which is also written to stderr.
	EndFailure
	// EndHang: after its replies the agent produces nothing more and never
	// ends by itself.
	EndHang
	// EndTruncated: the run's last line is cut in the middle and the
	// output ends there (the process exits 1; the HTTP connection drops).
	EndTruncated
	// EndGarbage: instead of a run, 4 KiB of binary garbage, then a clean
	// exit (or a clean end of the HTTP response).
	EndGarbage
	// EndEmpty: no output at all, then a clean exit (or response).
	EndEmpty
	// EndCrash: no output, CrashMessage on stderr, exit status 2 (or an
	// HTTP 500 carrying the message).
	EndCrash
	// EndSilent: no output, and the agent never ends by itself.
	EndSilent
)

// CrashMessage is what a crashing agent says on its way out.
const CrashMessage = "fatal: something broke in the agent"

// HugeLineBytes is the length of Script.HugeLine's line: tens of MB, longer
// than any line a backend should hold on to.
const HugeLineBytes = 20 << 20

// Script is what the agent or provider behind a backend does in one call.
type Script struct {
	// Model names the model in the dialect's output.
	Model string
	// Usage is what the whole run uses, if it runs to its end.
	Usage Usage
	// Replies is how many model replies the usage is spread over (at
	// least 1, except that a failure may come before any reply).
	Replies int
	// Pace is the pause before each reply.
	Pace time.Duration
	// End is how the run ends.
	End Ending
	// HugeLine: a line of HugeLineBytes comes before anything else.
	HugeLine bool
	// Stubborn: a process agent ignores SIGINT and SIGTERM.
	Stubborn bool
	// Children: a process agent first starts two helpers deaf to SIGINT
	// and SIGTERM: one in its process group, one that left it (setsid).
	Children bool
	// Secret is written in the answer, on stderr and in a failure's
	// message.
	Secret string
	// Replay, if set, is a file of captured output the agent prints line
	// by line instead of a scripted run (Usage and End do not apply).
	Replay string
	// State is a directory for the agent's records (its process ids, the
	// usage it told); the suite sets it.
	State string
}

// perReply returns reply i's share of the usage: the parts add up exactly.
func (s Script) perReply(i int) Usage {
	n := int64(max(s.Replies, 1))
	k := int64(i)
	part := func(v int64) int64 { return v*(k+1)/n - v*k/n }
	return Usage{Input: part(s.Usage.Input), CacheRead: part(s.Usage.CacheRead), CacheWrite: part(s.Usage.CacheWrite),
		Output: part(s.Usage.Output), USD: budget.USD(part(int64(s.Usage.USD)))}
}

// A Dialect writes a scripted run in one agent CLI's or provider's format.
type Dialect interface {
	// Begin starts the run (an init line, a session file). It may read the
	// limits the backend passed and set Agent.OutputCap and Agent.USDFence.
	Begin(a *Agent)
	// Reply writes one model reply: u is its usage; prev is the run's
	// usage before it.
	Reply(a *Agent, i int, prev, u Usage)
	// End writes the end of a successful run whose usage was total.
	End(a *Agent, total Usage)
	// Fail writes the end of a failed run, with msg, after total was used;
	// it sets Agent.ExitCode.
	Fail(a *Agent, msg string, total Usage)
}

// A Fencer is a Dialect whose agent has a spending fence of its own: once
// Agent.USDFence is reached after a reply, Fenced writes how it stopped and
// sets Agent.ExitCode.
type Fencer interface {
	Fenced(a *Agent, total Usage)
}

// An Interrupter is a Dialect whose agent, on SIGINT or SIGTERM, writes a
// last word before it exits (Claude Code's result line with the cost so
// far). Other agents die of the signal.
type Interrupter interface {
	Interrupted(a *Agent, total Usage)
}

// A Crasher is a Dialect that crashes its own way (an HTTP 500); by default
// a crash is CrashMessage on stderr and exit status 2.
type Crasher interface {
	Crash(a *Agent, msg string)
}

// A GarbageWriter is a Dialect that spreads garbage its own way (into a
// usage file as well); by default garbage goes to the output.
type GarbageWriter interface {
	Garbage(a *Agent, junk []byte)
}

// Agent is a scripted agent or provider as a Dialect sees it: where its
// output goes, and the record of what usage it told.
type Agent struct {
	Script Script
	// Args are the arguments the backend gave a process agent.
	Args []string
	// OutputCap is the output cap the backend passed (0: none): replies
	// never output more in all.
	OutputCap int64
	// USDFence is the spending fence the backend passed (0: none).
	USDFence budget.USD
	// ExitCode is the exit status of a process agent.
	ExitCode int

	out     io.Writer
	flush   func()
	stderr  io.Writer
	abort   func() // ends the output abruptly (a truncated run)
	hugePad string // what starts the huge line, so the transport carries it
	ctx     context.Context
	mu      sync.Mutex
	told    toldRecord
	cutNext bool
}

// toldRecord is what the agent told of its usage: Lo once a write is done,
// Hi as soon as it starts, so a reader killed mid-write saw between them.
type toldRecord struct {
	Lo, Hi Usage
	// UnreadOnCancel: a reader that cancels may drop what was written but
	// not read yet (an HTTP client), so Lo does not bind after a cancel.
	UnreadOnCancel bool
}

const toldFile = "told.json"

// Arg returns the value of a command-line flag the backend passed, or "".
func (a *Agent) Arg(flag string) string {
	for i, s := range a.Args {
		if s == flag && i+1 < len(a.Args) {
			return a.Args[i+1]
		}
		if v, ok := strings.CutPrefix(s, flag+"="); ok {
			return v
		}
	}
	return ""
}

// tell runs write, which tells the reader that the run used told in all.
func (a *Agent) tell(told Usage, write func()) {
	a.mu.Lock()
	a.told.Hi = a.told.Hi.atLeast(told)
	a.saveLocked()
	a.mu.Unlock()
	write()
	a.mu.Lock()
	a.told.Lo = a.told.Lo.atLeast(told)
	a.saveLocked()
	a.mu.Unlock()
}

func (a *Agent) saveLocked() {
	if a.Script.State == "" {
		return
	}
	b, _ := json.Marshal(a.told)
	p := filepath.Join(a.Script.State, toldFile)
	tmp := p + ".tmp"
	if os.WriteFile(tmp, b, 0o600) == nil {
		_ = os.Rename(tmp, p)
	}
}

// Print writes one line of output, after which the reader knows the run
// used told in all (the zero Usage tells nothing new).
func (a *Agent) Print(line []byte, told Usage) {
	a.tell(told, func() {
		if a.cutNext {
			_, _ = a.out.Write(line[:len(line)/2])
			a.flush()
			a.abort()
			return
		}
		_, _ = a.out.Write(append(append([]byte(nil), line...), '\n'))
		a.flush()
	})
}

// Append adds one line to a file the backend follows (a usage file, a
// rollout, a chat log), after which the reader knows the run used told.
func (a *Agent) Append(path string, line []byte, told Usage) {
	a.tell(told, func() {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "backendtest agent:", err)
			return
		}
		_, _ = f.Write(append(append([]byte(nil), line...), '\n'))
		_ = f.Close()
	})
}

// Text is what the agent says in reply i: the script's secret included.
func (a *Agent) Text(i int) string {
	return strings.TrimSpace(fmt.Sprintf("Working on step %d. %s", i+1, a.Script.Secret))
}

// Raw writes bytes that are no line of the protocol.
func (a *Agent) Raw(b []byte) {
	_, _ = a.out.Write(b)
	a.flush()
}

// Stderr writes a line to a process agent's stderr.
func (a *Agent) Stderr(msg string) {
	if a.stderr != nil {
		fmt.Fprintln(a.stderr, msg)
	}
}

// JSON encodes v for Print and Append.
func JSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the dialects' own values are encoded
	}
	return b
}

// Garbage returns n bytes of binary garbage, newlines and braces included,
// the same every time.
func Garbage(n int) []byte {
	r := rand.New(rand.NewPCG(7, 11))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// maxAgentLife bounds a scripted agent that hangs, so that nothing outlives
// the tests even when a backend under test fails to stop it. It is far
// beyond every bound the suite asserts.
const maxAgentLife = 90 * time.Second

// wait blocks until ctx is done or the agent has lived long enough.
func (a *Agent) wait() {
	select {
	case <-a.ctx.Done():
	case <-time.After(maxAgentLife):
	}
}

// play runs the script in dialect d.
func (a *Agent) play(d Dialect) {
	s := a.Script
	switch s.End {
	case EndGarbage:
		junk := Garbage(4 << 10)
		if g, ok := d.(GarbageWriter); ok {
			g.Garbage(a, junk)
		} else {
			a.Raw(junk)
		}
		return
	case EndEmpty:
		return
	case EndCrash:
		if c, ok := d.(Crasher); ok {
			c.Crash(a, CrashMessage)
		} else {
			a.Stderr(CrashMessage)
			a.ExitCode = 2
		}
		return
	case EndSilent:
		a.wait()
		return
	}
	if s.HugeLine {
		a.Raw([]byte(a.hugePad + strings.Repeat("x", HugeLineBytes) + "\n"))
	}
	if s.Secret != "" {
		a.Stderr("warning: retrying with key " + s.Secret)
	}
	if s.Replay != "" {
		a.replay()
		return
	}
	d.Begin(a)
	var total Usage
	for i := range s.Replies {
		select {
		case <-a.ctx.Done():
			if in, ok := d.(Interrupter); ok {
				in.Interrupted(a, total)
			}
			return
		case <-time.After(s.Pace):
		}
		u := s.perReply(i)
		if a.OutputCap > 0 {
			u.Output = max(min(u.Output, a.OutputCap-total.Output), 0)
		}
		d.Reply(a, i, total, u)
		total = total.Plus(u)
		if f, ok := d.(Fencer); ok && a.USDFence > 0 && total.USD >= a.USDFence {
			f.Fenced(a, total)
			return
		}
	}
	switch s.End {
	case EndSuccess:
		d.End(a, total)
	case EndFailure:
		a.Stderr("error: " + s.Secret)
		d.Fail(a, "the API refused the key "+s.Secret, total)
	case EndTruncated:
		a.cutNext = true
		d.End(a, total)
	case EndHang:
		a.wait()
		if in, ok := d.(Interrupter); ok && a.ctx.Err() != nil {
			in.Interrupted(a, total)
		}
	}
}

// replay prints the captured output of a real run.
func (a *Agent) replay() {
	data, err := os.ReadFile(a.Script.Replay)
	if err != nil {
		a.Stderr(err.Error())
		a.ExitCode = 90
		return
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if line = strings.TrimSuffix(line, "\n"); line != "" {
			a.Print([]byte(line), Usage{})
		}
	}
}

// Environment variables that turn the test binary into a scripted agent.
const (
	envScript  = "BACKENDTEST_AGENT_SCRIPT"
	envSleeper = "BACKENDTEST_SLEEPER"
)

// AgentCommand writes s into s.State and returns the command that plays it
// (the running test binary, whose TestMain calls Main) and the environment
// variables it needs: give both to the backend as its command and env.
func AgentCommand(t testing.TB, s Script) (path string, env map[string]string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.State, "script.json")
	if err := os.WriteFile(file, JSON(s), 0o600); err != nil {
		t.Fatal(err)
	}
	// The race detector's 1 s pause at a clean exit would slow every call.
	race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return exe, map[string]string{envScript: file, "GORACE": race}
}

// Main runs the package's tests; but when the test binary was started by a
// backend under test as its agent (see AgentCommand), it plays the script
// in dialect d and exits.
func Main(m *testing.M, d Dialect) {
	if os.Getenv(envSleeper) != "" {
		sleep()
	}
	if file := os.Getenv(envScript); file != "" {
		os.Exit(runAgent(file, d))
	}
	os.Exit(m.Run())
}

// sleep is a helper deaf to SIGINT and SIGTERM: only SIGKILL ends it early.
func sleep() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	time.Sleep(maxAgentLife)
	os.Exit(0)
}

func runAgent(file string, d Dialect) int {
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "backendtest agent:", err)
		return 90
	}
	var s Script
	if err := json.Unmarshal(data, &s); err != nil {
		fmt.Fprintln(os.Stderr, "backendtest agent:", err)
		return 90
	}
	ctx := context.Background()
	_, interrupts := d.(Interrupter)
	switch {
	case s.Stubborn:
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	case interrupts:
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
	}
	// Read the prompt as an agent would, so that writing it never blocks.
	go func() { _, _ = io.Copy(io.Discard, os.Stdin) }()
	records := []string{record("agent", os.Getpid())}
	if s.Children {
		for _, setsid := range []bool{false, true} {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(withoutScript(os.Environ()), envSleeper+"=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "backendtest agent:", err)
				return 90
			}
			role := "child"
			if setsid {
				role = "escapee"
			}
			records = append(records, record(role, cmd.Process.Pid))
		}
	}
	if err := os.WriteFile(filepath.Join(s.State, pidsFile), []byte(strings.Join(records, "\n")+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "backendtest agent:", err)
		return 90
	}
	a := &Agent{Script: s, Args: os.Args[1:], out: os.Stdout, stderr: os.Stderr, flush: func() {}, ctx: ctx,
		abort: func() { os.Exit(1) }}
	a.play(d)
	return a.ExitCode
}

func withoutScript(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, envScript+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// ServeHTTP plays s in dialect d as the answer to an HTTP request: a
// provider's streaming endpoint. The dialect writes the response's lines
// (Server-Sent Events, say); a truncated run drops the connection.
func ServeHTTP(w http.ResponseWriter, r *http.Request, s Script, d Dialect) {
	flusher, _ := w.(http.Flusher)
	a := &Agent{Script: s, out: w, ctx: r.Context(), hugePad: ": ", told: toldRecord{UnreadOnCancel: true},
		flush: func() {
			if flusher != nil {
				flusher.Flush()
			}
		},
		// The server drops the connection of a handler that panics with
		// ErrAbortHandler: the client sees the response cut off.
		abort: func() { panic(http.ErrAbortHandler) }}
	a.play(d)
}
