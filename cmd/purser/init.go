package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/sandbox"
	"github.com/purser-dev/purser/workspace"
)

// initBackends are the backends purser init can start a first task on.
var initBackends = []string{"sim", "claude", "codex", "gemini"}

// The files purser init writes, relative to the directory it sets up.
const (
	initTaskFile = ".purser/first-task.yaml"
	initSimFile  = ".purser/sim.yaml"
)

func newInitCmd() *cobra.Command {
	var backend string
	cmd := &cobra.Command{
		Use:   "init [DIR] [--backend sim|claude|codex|gemini]",
		Short: "Set up Purser in a repository: a commented purser.yaml and a first task",
		Long: `Writes, in DIR (default: the current directory), a commented purser.yaml
(backends, a default budget, degrade actions, where the database lives) and a
first task, ` + initTaskFile + `, that asks the agent for a one-line file: a
run of a few cents that shows the whole loop. With the sim backend (the
default when nothing asks), it runs offline: ` + "`purser run " + initTaskFile + "`" + `.

On a terminal, it asks which backend to start with; otherwise (CI, a
script) it asks nothing. It never overwrites a file: if one it would write
exists, it writes none and says which (exit 2).`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []cobra.Completion{},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			if backend == "" {
				backend = "sim"
				if f, ok := cmd.InOrStdin().(*os.File); ok && isatty.IsTerminal(f.Fd()) {
					var err error
					if backend, err = askBackend(cmd.InOrStdin(), cmd.OutOrStdout()); err != nil {
						return err
					}
				}
			}
			if !slices.Contains(initBackends, backend) {
				return badInput(fmt.Errorf("--backend: %q is not one purser init knows (known: %s); other backends go in purser.yaml by hand", backend, strings.Join(initBackends, ", ")))
			}
			return writeInit(cmd.OutOrStdout(), dir, backend)
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "", "the first task's backend: sim (offline, scripted), claude, codex or gemini (asked on a terminal; sim otherwise)")
	_ = cmd.RegisterFlagCompletionFunc("backend", cobra.FixedCompletions(initBackends, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// askBackend asks, on a terminal, which backend the first task runs on.
func askBackend(in io.Reader, out io.Writer) (string, error) {
	fmt.Fprintf(out, "Which agent should the first task run on? [%s] (sim: offline, scripted): ", strings.Join(initBackends, "/"))
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if line = strings.TrimSpace(line); line == "" {
		return "sim", nil
	}
	return line, nil
}

// writeInit writes the files, or none of them if any exists.
func writeInit(out io.Writer, dir, backend string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return badInput(fmt.Errorf("init: %w", err))
	}
	if !info.IsDir() {
		return badInput(fmt.Errorf("init: %s is not a directory", dir))
	}
	files := map[string]string{
		config.ProjectFileName: initProject(sandbox.Available()),
		initTaskFile:           fmt.Sprintf(initTaskYAML, backend, backendNote(backend)),
		initSimFile:            initSimYAML,
	}
	names := []string{config.ProjectFileName, initTaskFile, initSimFile}
	purserDir := filepath.Join(dir, filepath.Dir(initTaskFile))
	if err := refuseLink(purserDir); err != nil {
		return err
	}
	var present []string
	for _, name := range names {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			present = append(present, filepath.Join(dir, name))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("init: %w", err)
		}
	}
	if len(present) > 0 {
		return badInput(fmt.Errorf("init: %s already exist(s); purser init never overwrites a file, so it wrote nothing", strings.Join(present, ", ")))
	}
	if err := os.MkdirAll(purserDir, 0o755); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	// Again: a link put in its place since the check is not written through.
	if err := refuseLink(purserDir); err != nil {
		return err
	}
	for _, name := range names {
		// O_EXCL: a file that appeared since the check is not overwritten
		// either, nor a link followed.
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
		_, werr := io.WriteString(f, files[name])
		if err := errors.Join(werr, f.Close()); err != nil {
			return fmt.Errorf("init: %s: %w", name, err)
		}
		fmt.Fprintf(out, "wrote %s\n", filepath.Join(dir, name))
	}
	if workspace.InGitRepo(dir) {
		if err := ignoreArtifacts(out, dir); err != nil {
			return err
		}
	}
	task := filepath.Join(dir, initTaskFile)
	fmt.Fprintf(out, "\nNext:\n  purser check %s   # what would run, checked, without spending\n  purser run %s     # run it (%s)\n  purser explain first-task  # why it ended where it did\n",
		task, task, backendNote(backend))
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		fmt.Fprintf(out, "\nNote: %s is not a git repository; the agent's changes are never reverted, so version it first.\n", dir)
	}
	return nil
}

// artifactIgnores are the .gitignore lines for the reports Purser writes at
// a workspace's root when a task stops (workspace.ArtifactsOf): STATUS.md
// and BUDGET.md, and STATUS.<task>.md and BUDGET.<task>.md for a task
// sharing the workspace with another. Anchored: a file of those names
// elsewhere in the repository is the user's.
var artifactIgnores = []string{"/STATUS.md", "/BUDGET.md", "/STATUS.*.md", "/BUDGET.*.md"}

// ignoreArtifacts appends to dir's .gitignore (making it if need be) the
// artifactIgnores lines it lacks. It never rewrites what the file holds,
// and never writes through a link: then it says which lines to add.
func ignoreArtifacts(out io.Writer, dir string) error {
	path := filepath.Join(dir, ".gitignore")
	var have []byte
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("init: %w", err)
	case !fi.Mode().IsRegular():
		fmt.Fprintf(out, "\nNote: %s is not a plain file (a link?); not written through. Add these lines to ignore Purser's reports: %s\n", path, strings.Join(artifactIgnores, " "))
		return nil
	default:
		if have, err = os.ReadFile(path); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	present := map[string]bool{}
	for _, l := range strings.Split(string(have), "\n") {
		present[strings.TrimSpace(l)] = true
	}
	var add strings.Builder
	if len(have) > 0 && have[len(have)-1] != '\n' {
		add.WriteString("\n")
	}
	add.WriteString("# Purser's reports, written when a task stops (purser init)\n")
	var missing []string
	for _, l := range artifactIgnores {
		if !present[l] {
			add.WriteString(l + "\n")
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// O_APPEND: what the file holds stays as it is; O_NOFOLLOW: a link put
	// in its place since the check is not followed.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	_, werr := io.WriteString(f, add.String())
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("init: .gitignore: %w", err)
	}
	fmt.Fprintf(out, "added to %s: %s (the reports Purser writes when a task stops)\n", path, strings.Join(missing, " "))
	return nil
}

// refuseLink refuses a symbolic link where init writes into a directory:
// a repository may plant .purser -> ~/.ssh (or anywhere) to have init write
// there.
func refuseLink(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("init: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return badInput(fmt.Errorf("init: %s is a symbolic link (to %s); purser init writes only into a real directory of the repository, never through a link, so it wrote nothing: remove the link or make %s a directory", path, target, path))
	case !fi.IsDir():
		return badInput(fmt.Errorf("init: %s is not a directory, so it wrote nothing", path))
	}
	return nil
}

func backendNote(backend string) string {
	switch backend {
	case "claude":
		return "Claude Code: needs the claude CLI and ANTHROPIC_API_KEY"
	case "codex":
		return "Codex: needs the codex CLI and OPENAI_API_KEY"
	case "gemini":
		return "Gemini CLI: needs the gemini CLI and GEMINI_API_KEY"
	}
	return "the scripted sim backend: offline, costs nothing"
}

const initProjectYAML = `# purser.yaml: the project's defaults for every task under this directory.
# Purser finds it by walking up from a task file. Keys are camelCase; an
# unknown key is refused with its file, line and column.

%s
# Backends: the agents tasks can run on. A task names one (backend: claude).
# API keys come only from the environment, never from this file.
backends:
  sim:                       # scripted and offline: for trying Purser out
    type: sim
    script: .purser/sim.yaml
    models: {cheap: sim-small, standard: sim-large}
  claude:                    # Claude Code (claude CLI, ANTHROPIC_API_KEY)
    type: claude
    models: {cheap: claude-haiku-4-5, standard: claude-sonnet-4-5}
  codex:                     # Codex (codex CLI, OPENAI_API_KEY)
    type: codex
    models: {cheap: gpt-5-mini, standard: gpt-5.1}
  gemini:                    # Gemini CLI (gemini CLI, GEMINI_API_KEY)
    type: gemini
    models: {cheap: gemini-2.5-flash, standard: gemini-2.5-pro}

# The model tier a task starts on (switch_tier_cheap moves it to cheap).
modelTier: standard

# The default budget, over four optional metrics (usd, tokens, timeMinutes,
# maxIterations). A metric nobody configures is not enforced. Below optimal:
# OPTIMAL. From optimal: WARNING, and the degrade actions apply. At hard: the
# call in flight is cancelled, the task is BLOCKED, STATUS.md says why.
# A task's own budget: replaces this one as a whole.
budget:
  optimal: {usd: 1.00}
  warning: {usd: 2.00}       # "at: warning" actions wait for this line
  hard: {usd: 5.00, timeMinutes: 30, maxIterations: 8}

# What to give up, in order, once a task is in WARNING, to spend less.
degrade:
  actions:
    - shrink_context         # the goal, the failing output, the files the issue names
    - repair_only_mode       # "fix only failing validators"
    - disable_self_review    # no planning or self-review calls
    - {action: switch_tier_cheap, at: warning}   # the cheap model, from the warning line

# Where the database (the ledger that enforces budgets) lives. By default in
# your state directory ($XDG_STATE_HOME/purser/projects/...), outside every
# workspace, where no agent can rewrite it. Or: database: postgres://...
# database: /var/lib/purser/purser.db

# Alerts: webhooks told when a budget enters WARNING, passes its warning
# line, reaches HARD, or a task is BLOCKED (docs/alerts.md).
# alerts:
#   webhooks:
#     - name: team-chat
#       urlEnv: SLACK_WEBHOOK_URL   # the URL is a secret: keep it in the environment
#       format: slack
#       events: [hard, blocked]
`

// initSandboxOn is purser.yaml's sandbox section where a box can be made.
const initSandboxOn = `# The box (docs/sandbox.md): each agent and each validator runs with its
# workspace, a HOME of its own and nothing else of yours: none of your
# secrets, files or processes, no network but Purser's door. The sim
# backend runs inside Purser itself (not boxable); its validators are boxed.
# sandbox: off runs them as you, knowingly.
sandbox: on
`

// initProject is purser.yaml as init writes it: sandbox: on where a box can
// be made here (noBox nil), else sandbox: off with the reason, so that the
// choice is in the file rather than found at the first run.
func initProject(noBox error) string {
	section := initSandboxOn
	if noBox != nil {
		reason := strings.ReplaceAll(strings.TrimSpace(noBox.Error()), "\n", "\n#   ")
		section = "# The box (docs/sandbox.md) keeps each agent and validator to its workspace,\n" +
			"# away from your secrets, files, processes and network. None can be made on\n" +
			"# this machine:\n#   " + reason + "\n" +
			"# so the agents and validators run unboxed, as you, knowingly. Once a box\n" +
			"# can be made, write sandbox: on (the default where this key is absent).\n" +
			"sandbox: off\n"
	}
	return fmt.Sprintf(initProjectYAML, section)
}

const initTaskYAML = `# A first task: small, so that a run shows the whole loop for a few cents
# (nothing, on sim). Copy it for real work: change the goal and the issue,
# and make the validators your tests. Paths are relative to this file.
id: first-task
goal: Create the file purser-hello.txt at the root of the repository, containing the word hello.
issue: |
  A first task to see Purser at work. Create purser-hello.txt with one line
  that contains the word "hello". Change nothing else.
workspace: ..                # the repository: the agent works here; nothing is ever reverted
backend: %s                # %s
validators:                  # shell commands in the workspace; DONE when all exit 0
  - name: hello
    run: grep -q hello purser-hello.txt
    timeout: 1m
  # - name: tests
  #   run: go test ./...     # or: npm test, cargo test, pytest, make test
# Its own budget (replaces purser.yaml's as a whole): a few cents.
budget:
  optimal: {usd: 0.25}
  warning: {usd: 0.50}
  hard: {usd: 1.00, timeMinutes: 10, maxIterations: 3}
`

const initSimYAML = `# The sim backend's script: each call takes the next step; the last repeats.
# This one writes the file the first task asks for, at a made-up cost.
steps:
  - usage: {inputTokens: 1200, outputTokens: 150, costUsd: 0.01}
    delayMs: 200
    files:
      purser-hello.txt: |
        hello from Purser's first task
`
