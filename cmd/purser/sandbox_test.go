package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/agent"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/sandbox"
)

// requireBox skips where no box can be made, unless PURSER_TEST_SANDBOX is
// required (CI), where it fails.
func requireBox(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("PURSER_TEST_SANDBOX") == "required" {
			t.Fatalf("PURSER_TEST_SANDBOX=required: %v", err)
		}
		t.Skip(err)
	}
}

// attackAgent is an exec agent that tries issue 20's attacks and writes what
// it got into its workspace: Purser's secrets from its environment (item 1),
// the SQLite ledger, read then deleted (item 3), a signal to the Purser that
// supervises it (item 4: kill -0, which a SIGSTOP would need to pass too, so
// that the test does not freeze itself).
const attackAgent = `db="$1"; purser_pid="$2"
env > env.txt
if cat "$db" > /dev/null 2>&1; then echo read > ledger-read.txt; fi
rm -f "$db" 2>/dev/null
if kill -0 "$purser_pid" 2>/dev/null; then echo reached > signal.txt; fi
echo done`

// snoopValidator looks for the real HOME (~/.ssh and the rest).
const snoopValidator = `if ls -a "$REAL_HOME" > /dev/null 2>&1; then echo saw > home-seen.txt; fi; true`

// runAttack runs a task on the attack agent with the project's sandbox:
// mode and returns the workspace and the database path.
func runAttack(t *testing.T, mode string) (ws, db string) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, ".state"))
	realHome, err := os.UserHomeDir()
	if err != nil || realHome == "" {
		t.Skip("no HOME to look for")
	}
	t.Setenv("REAL_HOME", realHome)
	db = config.DefaultDatabase(dir)
	secrets := map[string]string{"PGPASSWORD": "pg-secret-20", "PURSER_DB": db, "PURSER_SERVE_TOKEN": "serve-secret-20",
		"SLACK_WEBHOOK_URL": "https://hooks.example/secret-20"}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	ws = filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	project := fmt.Sprintf("sandbox: %s\nbackends:\n  agent:\n    type: exec\n    command: [sh, -c, %s, sh, %s, %s]\n",
		mode, strconv.Quote(attackAgent), strconv.Quote(db), strconv.Quote(strconv.Itoa(os.Getpid())))
	task := fmt.Sprintf("id: attack\ngoal: try the attacks\nworkspace: ./ws\nbackend: agent\nvalidators:\n  - name: snoop\n    run: %s\n  - name: home\n    run: %s\nbudget:\n  hard: {maxIterations: 1}\n",
		strconv.Quote(snoopValidator), strconv.Quote(`test "$HOME" != "$REAL_HOME"`))
	for name, text := range map[string]string{"purser.yaml": project, "task.yaml": task} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--json", filepath.Join(dir, "task.yaml")}, &stdout, &stderr)
	t.Logf("purser run: exit %d\n%s", code, stderr.String())
	return ws, db
}

// Issue 20's attacks by an exec agent and a validator, reproduced with
// sandbox: off, held with sandbox: on.
func TestSandboxHoldsIssue20Attacks(t *testing.T) {
	t.Run("off reproduces", func(t *testing.T) {
		ws, db := runAttack(t, "off")
		env := readFile(t, filepath.Join(ws, "env.txt"))
		for _, k := range []string{"PGPASSWORD=", "PURSER_DB=", "PURSER_SERVE_TOKEN=", "SLACK_WEBHOOK_URL="} {
			if !strings.Contains(env, k) {
				t.Errorf("unboxed, the agent did not get %s: the attack is not reproduced", k)
			}
		}
		for _, f := range []string{"ledger-read.txt", "signal.txt", "home-seen.txt"} {
			if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
				t.Errorf("unboxed, %s was not written: the attack is not reproduced", f)
			}
		}
		if _, err := os.Stat(db); err == nil {
			t.Errorf("unboxed, the agent could not delete the ledger %s: the attack is not reproduced", db)
		}
	})
	t.Run("on holds", func(t *testing.T) {
		requireBox(t)
		ws, db := runAttack(t, "on")
		env := readFile(t, filepath.Join(ws, "env.txt"))
		if !strings.Contains(env, "PURSER_USAGE_FILE=") {
			t.Fatalf("the boxed agent did not run, or lacks the exec protocol:\n%s", env)
		}
		for _, k := range []string{"PGPASSWORD", "PURSER_DB", "PURSER_SERVE_TOKEN", "SLACK_WEBHOOK_URL", "secret-20"} {
			if strings.Contains(env, k) {
				t.Errorf("item 1: the boxed agent's environment holds %s", k)
			}
		}
		if _, err := os.Stat(filepath.Join(ws, "ledger-read.txt")); err == nil {
			t.Error("item 3: the boxed agent read the ledger")
		}
		if _, err := os.Stat(db); err != nil {
			t.Errorf("item 3: the ledger %s is gone: %v", db, err)
		}
		if _, err := os.Stat(filepath.Join(ws, "signal.txt")); err == nil {
			t.Error("item 4: the boxed agent could signal the Purser that supervises it")
		}
		if _, err := os.Stat(filepath.Join(ws, "home-seen.txt")); err == nil {
			t.Error("a boxed validator saw the real HOME")
		}
		status := readFile(t, filepath.Join(ws, "STATUS.md"))
		if !strings.Contains(status, "**DONE**") || !strings.Contains(status, "sandbox: on (the agent and the validators ran in a box") {
			t.Errorf("STATUS.md:\n%s", status)
		}
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Where sandbox: is on, said or by default, but no box can be made (here:
// no bwrap on the PATH), purser run and submit refuse, exit 2, saying why
// and what to do, and run or queue nothing; purser check says the same.
func TestSandboxOnWithoutABoxRefuses(t *testing.T) {
	for _, c := range []struct{ name, project, said string }{
		{"said", "sandbox: on\n", "purser.yaml sandbox: on"},
		{"by default", "# no sandbox: key\n", "by default: purser.yaml has no sandbox: key"},
	} {
		t.Run(c.name, func(t *testing.T) { refusesWithoutABox(t, c.project, c.said) })
	}
}

func refusesWithoutABox(t *testing.T, project, said string) {
	bin := purserBinary.Path(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"purser.yaml": project,
		"task.yaml": "id: boxless\ngoal: g\nworkspace: ./ws\nbackend: {type: exec, command: [/bin/sh, -c, 'echo ran > ran.txt']}\n" +
			"validators: [{name: ok, run: 'true'}]\nbudget: {hard: {maxIterations: 1}}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	queue := filepath.Join(dir, "queue.db")
	for _, args := range [][]string{{"run", "task.yaml"}, {"check", "task.yaml"}, {"submit", "--db", queue, "--run", "r", "task.yaml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, ".state"), "HOME=" + dir}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitBadInput {
			t.Fatalf("purser %s: %v, want exit %d:\n%s", args[0], err, exitBadInput, out)
		}
		for _, want := range []string{"sandbox is on but no box can be made here", "backend exec", "validators (" + said + ")", "install bubblewrap", "sandbox: off"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("purser %s says no %q:\n%s", args[0], want, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
		t.Error("the agent ran unboxed")
	}
	if _, err := os.Stat(queue); err == nil {
		t.Error("submit made the queue before refusing: nothing is to be queued")
	}
}

// purser check says, per backend and for the validators, whether the box is
// on and what it lets through, or that it is off and what that means.
func TestCheckSaysTheSandbox(t *testing.T) {
	for _, c := range []struct {
		project string
		want    []string
	}{
		{"sandbox: off\nbackends:\n  a: {type: exec, command: [/bin/true]}\n", []string{
			"sandbox     backend a: off: the agent runs as you, with your environment (secrets included)",
			"sandbox     validators: off: each validator runs as you"}},
		{"sandbox: {mode: on, env: [GOFLAGS], readOnly: [/opt]}\nbackends:\n  a: {type: exec, command: [/bin/true], env: {FOO: bar}}\n", []string{
			"sandbox     backend a: on: files: the workspace read-write, its own HOME ",
			"/agent-c read-write", "/opt read-only", "a private /tmp", "env: COLORTERM, FOO, GOFLAGS, LANG, LANGUAGE, LC_*, NO_COLOR, PATH, TERM, TZ",
			"network: none (no door)",
			"sandbox     validators: on: files: the workspace read-write"}},
		{"sandbox: off\nbackends:\n  a: {type: claude, command: /bin/true, sandbox: on, env: {FOO: bar}}\n", []string{
			"sandbox     backend a: on: files: the workspace read-write, its own HOME ",
			"ANTHROPIC_API_KEY (the door's scoped token)", "FOO",
			"network: only Purser's door, 127.0.0.1:PORT inside relayed to the call's wire meter",
			"sandbox     validators: off"}},
		{"sandbox: {mode: on, network: {allow: [\"registry.npmjs.org:443\"]}}\nbackends:\n  a: {type: exec, command: [/bin/true]}\n", []string{
			"sandbox     backend a: on: files:", "network: none (no door); and through Purser's egress proxy (HTTPS_PROXY, every connection logged) registry.npmjs.org:443 only",
			"sandbox     validators: on: files:"}},
		{"backends:\n  a: {type: codex, command: /bin/true, sandbox: on}\n", []string{
			"sandbox     backend a: on: files:", "OPENAI_BASE_URL", "network: only Purser's door",
			"Codex's own sandbox is off inside the box"}},
		{"backends:\n  a: {type: sim, script: s.yaml}\n", []string{
			"sandbox     on by default (",
			"sandbox     backend a: in-process: type sim is not boxable (it calls its model from inside Purser",
			"sandbox     validators: on: files: the workspace read-write"}},
		{"backends:\n  a: {type: exec, command: [/bin/true]}\n", []string{
			"sandbox     on by default (", "has no sandbox: key; write sandbox: off there to run unboxed, knowingly)",
			"sandbox     backend a: on: files: the workspace read-write",
			"sandbox     validators: on: files: the workspace read-write"}},
	} {
		dir := t.TempDir()
		t.Setenv("XDG_STATE_HOME", filepath.Join(dir, ".state"))
		t.Setenv("ANTHROPIC_API_KEY", "sk-test") // held at the door: only its token's name enters the box
		if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
			t.Fatal(err)
		}
		task := "id: c\ngoal: g\nworkspace: ./ws\nbackend: a\nvalidators: [{name: ok, run: 'true'}]\nbudget: {hard: {maxIterations: 1}}\n"
		for name, text := range map[string]string{"purser.yaml": c.project, "task.yaml": task, "s.yaml": "steps:\n  - usage: {inputTokens: 1}\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"check", filepath.Join(dir, "task.yaml")}, &stdout, &stderr)
		if code != exitOK && sandbox.Available() == nil {
			t.Fatalf("check: exit %d\n%s", code, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("check says no %q:\n%s", w, stdout.String())
			}
		}
	}
}

// unboxedWhereNoBox makes the project at dir run unboxed, knowingly, where
// no box can be made here: its purser.yaml says sandbox: off (added to the
// file, or the file written). A test that is not about the box then runs as
// it always did on such a machine; where a box can be made it runs boxed,
// by default, untouched. With PURSER_TEST_SANDBOX=required it fails
// instead. It returns what it did ("" for nothing).
func unboxedWhereNoBox(dir string) (string, error) {
	noBox := sandbox.Available()
	if noBox == nil {
		return "", nil
	}
	if os.Getenv("PURSER_TEST_SANDBOX") == "required" {
		return "", fmt.Errorf("PURSER_TEST_SANDBOX=required: %w", noBox)
	}
	path := filepath.Join(dir, config.ProjectFileName)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "sandbox:") {
			return "", nil // the fixture says, whatever it says
		}
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, unboxedNote...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: sandbox: off, since no box can be made here (%v)", path, noBox), nil
}

// unboxedNote is what unboxedWhereNoBox adds.
const unboxedNote = "# no box can be made here: this test runs unboxed, knowingly\nsandbox: off\n"

// unboxScriptWhereNoBox is unboxedWhereNoBox for a script's work directory:
// its own purser.yaml (written where it has none) and every other
// purser.yaml in it.
func unboxScriptWhereNoBox(log func(...any), work string) error {
	if sandbox.Available() != nil && os.Getenv("PURSER_TEST_SANDBOX") == "required" {
		return nil // the scripts that need no box run boxed or fail; [box] says so
	}
	dirs := []string{work}
	err := filepath.WalkDir(work, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == config.ProjectFileName && filepath.Dir(path) != work {
			dirs = append(dirs, filepath.Dir(path))
		}
		return err
	})
	for _, dir := range dirs {
		did, werr := unboxedWhereNoBox(dir)
		if did != "" {
			log(did)
		}
		err = errors.Join(err, werr)
	}
	return err
}

// unboxWhereNoBox is unboxedWhereNoBox for a Go test.
func unboxWhereNoBox(t testing.TB, dir string) {
	t.Helper()
	did, err := unboxedWhereNoBox(dir)
	if err != nil {
		t.Fatal(err)
	}
	if did != "" {
		t.Log(did)
	}
}

// A boxed type: agent backend's network is the door, not none.
func TestCheckSaysTheAgentsDoor(t *testing.T) {
	on := backend.SandboxConfig{Setting: sandbox.Setting{Mode: sandbox.ModeOn}, Homes: "/state/boxes"}
	line := backendBox(purser.Task{ID: "a", Backend: purser.BackendSpec{Name: "a", Type: "agent", Options: agent.NewOptions()}}, on)
	if !strings.Contains(line, "network: only Purser's door") || strings.Contains(line, noDoor) {
		t.Errorf("boxed type: agent: %s", line)
	}
	if line := backendBox(purser.Task{ID: "e", Backend: purser.BackendSpec{Name: "e", Type: "exec"}}, on); !strings.Contains(line, "network: "+noDoor) {
		t.Errorf("boxed exec: %s", line)
	}
}

// check --json prints JSON only: the sandbox lines are the text form's.
func TestCheckJSONHasNoSandboxLines(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, ".state"))
	writeFiles(t, dir, map[string]string{"ws/.keep": "",
		"task.yaml": "id: j\ngoal: g\nworkspace: ./ws\nbackend: {type: exec, command: [/bin/true]}\nvalidators: [{name: ok, run: 'true'}]\nbudget: {hard: {maxIterations: 1}}\n"})
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"check", "--json", filepath.Join(dir, "task.yaml")}, &stdout, &stderr)
	if !json.Valid(stdout.Bytes()) || strings.Contains(stdout.String(), "  sandbox  ") {
		t.Errorf("check --json printed more than JSON:\n%s", stdout.String())
	}
}
