package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/internal/proctest"
	"github.com/purser-dev/purser/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.IsInit() { // the box's init, when a test boxes an agent in-process
		sandbox.InitMain()
	}
	testscript.Main(withPurserBinary{m}, map[string]func(){
		"purser": func() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// The real purser binary, for the tests that need it as a process of its
// own (signals, SIGKILL, two processes on one database): built at most once
// per test run, on first use, into a directory TestMain removes at the end.
var purserBinary = proctest.Binary{Package: "."}

// withPurserBinary runs the tests with a directory for the purser binary.
// testscript.Main calls Run only in the test process itself, not when it
// re-executes the test binary as the scripts' "purser" command.
type withPurserBinary struct{ m *testing.M }

func (w withPurserBinary) Run() int {
	dir, err := os.MkdirTemp("", "purser-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "purser binary directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	purserBinary.Dir = dir
	// Purser's state — a project's default database, its boxes' HOMEs, the
	// door's journals — goes under the run's own directory, not the real
	// $XDG_STATE_HOME of whoever runs the tests (a test sets its own where
	// it looks there).
	if err := os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state")); err != nil {
		fmt.Fprintln(os.Stderr, "XDG_STATE_HOME:", err)
		return 1
	}
	return w.m.Run()
}

// buildPurser returns the real binary, building it on the first call.
func buildPurser(t testing.TB) string { return purserBinary.Path(t) }

// TestScripts runs the end-to-end scripts in testdata/script: the real
// binary's exit codes, stdout and stderr.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", mustAbs("../../examples"))
			// The shared corpus of recorded runs, beside the repository.
			env.Setenv("REPLAY_CORPUS", mustAbs("../../../shared/replay/replay.jsonl"))
			// Default databases land in the script's own state directory.
			env.Setenv("XDG_STATE_HOME", env.WorkDir+"/.state")
			// Boxed by default; unboxed, knowingly, where no box can be
			// made here (said in the script's log).
			return unboxScriptWhereNoBox(env.T().Log, env.WorkDir)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// cp-demo copies examples/demo into the script's work directory.
			// exits N CMD ARGS... runs a command and checks its exact exit code.
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) < 2 {
					ts.Fatalf("usage: exits CODE COMMAND [ARGS...]")
				}
				want, err := strconv.Atoi(args[0])
				ts.Check(err)
				err = ts.Exec(args[1], args[2:]...)
				got := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("%v", err)
				}
				if got != want {
					ts.Fatalf("%s exited %d, want %d", args[1], got, want)
				}
			},
			// eventually SECONDS REGEXP CMD ARGS... runs a command again
			// and again until its stdout matches, for a state another
			// process (a command started with &) reaches in its own time.
			"eventually": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) < 3 {
					ts.Fatalf("usage: eventually SECONDS REGEXP COMMAND [ARGS...]")
				}
				secs, err := strconv.Atoi(args[0])
				ts.Check(err)
				re, err := regexp.Compile(args[1])
				ts.Check(err)
				for deadline := time.Now().Add(time.Duration(secs) * time.Second); ; time.Sleep(200 * time.Millisecond) {
					_ = ts.Exec(args[2], args[3:]...)
					if re.MatchString(ts.ReadFile("stdout")) {
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("%s: stdout did not match %q within %ds", args[2], args[1], secs)
					}
				}
			},
			"cp-demo": func(ts *testscript.TestScript, neg bool, args []string) {
				src := mustAbs("../../examples/demo")
				work := ts.Getenv("WORK")
				// The demo brings its own purser.yaml, in place of one
				// Setup wrote where no box can be made.
				if b, err := os.ReadFile(filepath.Join(work, config.ProjectFileName)); err == nil && string(b) == unboxedNote {
					ts.Check(os.Remove(filepath.Join(work, config.ProjectFileName)))
				}
				ts.Check(os.CopyFS(work, os.DirFS(src)))
				ts.Check(unboxScriptWhereNoBox(func(a ...any) { ts.Logf("%s", fmt.Sprint(a...)) }, work))
			},
		},
		Condition: func(cond string) (bool, error) {
			if cond != "box" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			// [!box] skip: a script that cannot run unboxed (it needs the
			// default, or no purser.yaml of the harness's) skips where no
			// box can be made, unless PURSER_TEST_SANDBOX=required.
			err := sandbox.Available()
			if err != nil && os.Getenv("PURSER_TEST_SANDBOX") == "required" {
				return false, fmt.Errorf("PURSER_TEST_SANDBOX=required: %w", err)
			}
			return err == nil, nil
		},
	})
}

func mustAbs(rel string) string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return wd + "/" + rel
}
