package gemini

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
)

// Gemini CLI's failed results, as the fixtures and the real CLI against the
// mock show them, classified as on every backend.
func TestGeminiFaults(t *testing.T) {
	for _, tc := range []struct {
		fault  proc.Fault
		failed string
	}{
		{proc.FaultRefused, "[API Error: exception TypeError: fetch failed sending request]"},
		{proc.FaultRateLimit, `[API Error: {"error":{"code":429,"message":"mock injected 429","status":"RESOURCE_EXHAUSTED"}}]`},
		{proc.FaultServer, `[API Error: {"error":{"code":500,"message":"mock injected 500","status":"INTERNAL"}}]`},
		{proc.FaultServer, `[API Error: {"error":{"code":503,"message":"busy","status":"UNAVAILABLE"}}]`},
		{proc.FaultDropped, "error"}, // err.drop-always: a bare status, no words
		{proc.FaultDropped, "[API Error: terminated]"},
		{proc.FaultFatal, `[API Error: {"error":{"code":400,"message":"mock injected 400","status":"INVALID_ARGUMENT"}}]`},
		{proc.FaultFatal, `[API Error: {"error":{"code":401,"message":"API key not valid","status":"UNAUTHENTICATED"}}]`},
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

// Gemini CLI's announced retries are counted from its stderr: nine in the
// fixture where every request got HTTP 500 and it retried by default.
func TestGeminiInnerRetriesCounted(t *testing.T) {
	stderr, err := os.ReadFile("testdata/err.500-always.stream-json.stderr.txt")
	if err != nil {
		t.Fatal(err)
	}
	if n := innerRetries(string(stderr)); n != 9 {
		t.Fatalf("%d retries counted, want the fixture's 9", n)
	}
}

// The system settings Purser gives Gemini CLI are those in force with
// general.maxAttempts at 1: nothing of the administrator's is lost, and a
// file that is not plain JSON is left alone, with the reason.
func TestGeminiNoRetrySettings(t *testing.T) {
	dir := t.TempDir()
	read := func(path string) map[string]any {
		t.Helper()
		var m map[string]any
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	admin := filepath.Join(dir, "admin.json")
	if err := os.WriteFile(admin, []byte(`{"general": {"vimMode": true}, "telemetry": {"enabled": false}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := noRetrySettings(filepath.Join(dir, "out"), admin)
	if err != nil {
		t.Fatal(err)
	}
	got := read(path)
	general, _ := got["general"].(map[string]any)
	if general["maxAttempts"] != float64(1) || general["vimMode"] != true || got["telemetry"] == nil {
		t.Fatalf("settings %v: want the admin's, with general.maxAttempts 1", got)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm()&0o022 != 0 {
		t.Fatalf("settings directory %v (%v): Gemini CLI skips settings others may write", fi.Mode(), err)
	}

	none, err := noRetrySettings(filepath.Join(dir, "out"), filepath.Join(dir, "missing.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := read(none); len(got) != 1 || got["general"].(map[string]any)["maxAttempts"] != float64(1) {
		t.Fatalf("settings %v: want only general.maxAttempts 1", got)
	}

	commented := filepath.Join(dir, "commented.json")
	if err := os.WriteFile(commented, []byte("// admin\n{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := noRetrySettings(filepath.Join(dir, "out"), commented); err == nil || !strings.Contains(err.Error(), "own retries stay on") {
		t.Fatalf("err %v: want the file left alone, saying the retries stay on", err)
	}
}

// Gemini CLI runs with the system settings that switch its retries off, the
// retries it announces all the same are counted, and its failure is
// classified.
func TestGeminiCallRunsWithoutItsOwnRetries(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	script := filepath.Join(dir, "gemini")
	body := `#!/bin/sh
grep -q '"maxAttempts": 1' "$GEMINI_CLI_SYSTEM_SETTINGS_PATH" || { echo "no maxAttempts in $GEMINI_CLI_SYSTEM_SETTINGS_PATH" >&2; exit 9; }
echo '{"type":"init","session_id":"s1","model":"gemini-2.5-pro"}'
echo 'Attempt 1 failed with status 429. Retrying with backoff... _ApiError' >&2
echo '{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":429,\"message\":\"mock injected 429\",\"status\":\"RESOURCE_EXHAUSTED\"}}]"}}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := New(purser.BackendSpec{Type: "gemini", Options: map[string]any{"command": script, "env": map[string]any{"HOME": dir}}})
	if err != nil {
		t.Fatal(err)
	}
	var retries atomic.Int64
	hooks := purser.CallHooks{OnInnerRetry: func() { retries.Add(1) }}
	_, err = b.Call(t.Context(), purser.CallRequest{Workspace: dir, Prompt: "p", Hooks: hooks}, func(budget.UsageEvent) {})
	var fe *proc.FaultError
	if !errors.As(err, &fe) || fe.Fault != proc.FaultRateLimit {
		t.Fatalf("%v: want a rate limit", err)
	}
	if retries.Load() != 1 {
		t.Fatalf("%d inner retries counted, want the one announced", retries.Load())
	}
}
