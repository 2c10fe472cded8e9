package exec_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/backendtest"
	pexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.IsInit() { // the box's init, when a test boxes the agent
		sandbox.InitMain()
	}
	backendtest.Main(m, execAgent{})
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T, s backendtest.Script) purser.Backend {
			path, env := backendtest.AgentCommand(t, s)
			envOpt := map[string]any{}
			for k, v := range env {
				envOpt[k] = v
			}
			return backendtest.Build(t, pexec.New, purser.BackendSpec{Type: "exec", Dir: s.State, Options: map[string]any{"command": []any{path}, "env": envOpt}})
		},
		Unsupported: map[backendtest.Capability]string{
			backendtest.USDFence: "exec passes no spending cap to its command (its protocol has PURSER_MAX_OUTPUT_TOKENS only): the engine's hard cap stops it",
			backendtest.RejectsBadOutput: "exec's stdout is free text, the command's answer: garbage or silence there is no error, " +
				"and a bad line in PURSER_USAGE_FILE, or no report at all, is said in the note",
		},
	})
}

// execAgent speaks exec's protocol: usage lines appended to
// $PURSER_USAGE_FILE, the answer on stdout, the cap in
// $PURSER_MAX_OUTPUT_TOKENS, exit status 3 for a failure.
type execAgent struct{}

func (execAgent) Begin(a *backendtest.Agent) {
	a.OutputCap, _ = strconv.ParseInt(os.Getenv("PURSER_MAX_OUTPUT_TOKENS"), 10, 64)
}

func (execAgent) Reply(a *backendtest.Agent, i int, prev, u backendtest.Usage) {
	line := map[string]any{"inputTokens": u.Input, "outputTokens": u.Output, "cacheReadTokens": u.CacheRead, "cacheWriteTokens": u.CacheWrite}
	if u.USD > 0 {
		line["costUsd"] = u.USD
	}
	a.Append(os.Getenv("PURSER_USAGE_FILE"), backendtest.JSON(line), prev.Plus(u))
	a.Print([]byte(a.Text(i)), backendtest.Usage{})
}

func (execAgent) End(a *backendtest.Agent, total backendtest.Usage) {
	a.Print([]byte("done"), backendtest.Usage{})
}

func (execAgent) Fail(a *backendtest.Agent, msg string, total backendtest.Usage) {
	a.Stderr(msg)
	a.ExitCode = 3
}

func (execAgent) Garbage(a *backendtest.Agent, junk []byte) {
	a.Raw(junk)
	a.Append(os.Getenv("PURSER_USAGE_FILE"), junk, backendtest.Usage{})
}
