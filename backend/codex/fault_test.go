package codex

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
)

type budgetEvent = budget.UsageEvent

// atomicCount counts from any goroutine.
type atomicCount struct{ n atomic.Int64 }

func (c *atomicCount) inc()       { c.n.Add(1) }
func (c *atomicCount) get() int64 { return c.n.Load() }

// Codex's failed turns, as the fixtures and the real CLI against the mock
// show them, classified as on every backend.
func TestCodexFaults(t *testing.T) {
	for _, tc := range []struct {
		fault  proc.Fault
		failed string
	}{
		{proc.FaultRefused, "Reconnecting... waiting for network (Connection failed: error sending request)"},
		{proc.FaultRateLimit, "exceeded retry limit, last status: 429 Too Many Requests"},
		{proc.FaultServer, "We’re currently experiencing high demand, which may cause temporary errors."},
		{proc.FaultServer, "unexpected status 503 Service Unavailable: overloaded"},
		{proc.FaultDropped, "stream disconnected before completion: stream closed before response.completed"},
		{proc.FaultFatal, `{"error":{"message":"mock injected 400","type":"invalid_request_error","code":"invalid_request_error","param":null}}`},
		{proc.FaultFatal, "unexpected status 401 Unauthorized: mock injected 401, url: http://127.0.0.1:8788/v1/responses"},
	} {
		t.Run(string(tc.fault)+" "+tc.failed, func(t *testing.T) {
			err := Classify(tc.failed)
			var fe *proc.FaultError
			if !errors.As(err, &fe) || fe.Fault != tc.fault || errors.Is(err, purser.ErrTransient) != tc.fault.Transient() {
				t.Fatalf("%v: want %s (transient %v)", err, tc.fault, tc.fault.Transient())
			}
		})
	}
}

// Codex's own retries are switched off for the provider its config defines
// and uses; a built-in provider cannot be configured, nor an id that -c
// cannot name.
func TestCodexRetryArgs(t *testing.T) {
	off := func(p string) []string {
		return []string{"-c", "model_providers." + p + ".request_max_retries=0", "-c", "model_providers." + p + ".stream_max_retries=0"}
	}
	for _, tc := range []struct {
		name, config, option string
		want                 []string
	}{
		{"custom provider in use", "model_provider = \"mock\"\n[model_providers.mock]\nname = \"Mock\"\n", "", off("mock")},
		{"built-in provider", "model_provider = \"openai\"\n", "", nil},
		{"no config", "", "", nil},
		{"provider named in the options", "", "my-proxy", off("my-proxy")},
		{"built-in named in the options", "", "openai", nil},
		{"an id -c cannot name", "model_provider = \"my.proxy\"\n[model_providers.\"my.proxy\"]\nname = \"P\"\n", "", nil},
		{"provider used but not defined", "model_provider = \"elsewhere\"\n", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b := &Backend{opts: Options{Provider: tc.option}}
			b.cli.Env = map[string]string{"CODEX_HOME": home}
			if got := b.retryArgs(); !slices.Equal(got, tc.want) {
				t.Fatalf("retry args %q, want %q", got, tc.want)
			}
		})
	}
}

// Codex waits out a refused connection without end, saying so on every
// try: Purser gives up on the call at the first such line, as a refused
// connection, and counts the retry Codex announced.
func TestCodexWaitingForNetworkIsGivenUp(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "codex")
	body := "#!/bin/sh\ncat >/dev/null\necho '{\"type\":\"thread.started\",\"thread_id\":\"t1\"}'\n" +
		"while :; do echo '{\"type\":\"error\",\"message\":\"Reconnecting... waiting for network (Connection failed: error sending request)\"}'; sleep 1; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := New(purser.BackendSpec{Type: "codex", Dir: dir, Options: map[string]any{"command": script, "env": map[string]any{"CODEX_HOME": dir}}})
	if err != nil {
		t.Fatal(err)
	}
	var retries atomicCount
	hooks := purser.CallHooks{OnInnerRetry: retries.inc}
	_, err = b.Call(t.Context(), purser.CallRequest{Workspace: dir, Prompt: "p", Hooks: hooks}, func(budgetEvent) {})
	var fe *proc.FaultError
	if !errors.As(err, &fe) || fe.Fault != proc.FaultRefused || !errors.Is(err, purser.ErrTransient) {
		t.Fatalf("%v: want a refused connection, transient", err)
	}
	if retries.get() < 1 {
		t.Fatalf("inner retries %d: want Codex's announced retry counted", retries.get())
	}
}
