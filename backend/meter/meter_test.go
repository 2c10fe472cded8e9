package meter_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/meter"
	"github.com/purser-dev/purser/budget"
)

func startMeter(t *testing.T, upstream string) (*meter.Meter, string) {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "wire", "call.jsonl")
	m, err := meter.Start(upstream, journal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, journal
}

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// Each API's reply, streamed or whole, lands in the journal once with the
// usage the provider sent (the mock's fixed tool-call figures, README of
// fixtures/agent-cli/mock), in Purser's shape: input counts the cache
// tokens, output the thoughts.
func TestMeterJournalsTheUsageOfEveryAPIsReply(t *testing.T) {
	mock := backendtest.StartMock(t)
	anthropic := budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 5500, CacheReadTokens: 4000, CacheWriteTokens: 300, OutputTokens: 60, ServiceTier: "standard"}
	anthropicStream := anthropic
	anthropicStream.ServiceTier = "" // the mock's stream leaves it out
	openai := budget.UsageEvent{Model: "gpt-5.5", InputTokens: 5200, CacheReadTokens: 4000, OutputTokens: 60, ReasoningTokens: 20}
	gemini := budget.UsageEvent{Model: "gemini-2.5-pro", InputTokens: 5200, CacheReadTokens: 4000, OutputTokens: 80, ReasoningTokens: 20}
	const prompt = "Create mock_out.txt. MOCK_TOOL"
	for _, tc := range []struct {
		name, path, body string
		want             budget.UsageEvent
	}{
		{"anthropic stream", "/v1/messages", `{"model":"claude-sonnet-4-5","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}],"tools":[{"name":"Bash","input_schema":{}}]}`, anthropicStream},
		{"anthropic json", "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"` + prompt + `"}],"tools":[{"name":"Bash","input_schema":{}}]}`, anthropic},
		{"responses stream", "/v1/responses", `{"model":"gpt-5.5","stream":true,"input":"` + prompt + `","tools":[{"type":"function","name":"shell"}]}`, openai},
		{"responses json", "/v1/responses", `{"model":"gpt-5.5","input":"` + prompt + `","tools":[{"type":"function","name":"shell"}]}`, openai},
		{"chat stream", "/v1/chat/completions", `{"model":"gpt-5.5","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + prompt + `"}],"tools":[{"type":"function","function":{"name":"shell"}}]}`, openai},
		{"chat json", "/v1/chat/completions", `{"model":"gpt-5.5","messages":[{"role":"user","content":"` + prompt + `"}],"tools":[{"type":"function","function":{"name":"shell"}}]}`, openai},
		{"gemini sse", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"` + prompt + `"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`, gemini},
		{"gemini json array", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"` + prompt + `"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`, gemini},
		{"gemini json", "/v1beta/models/gemini-2.5-pro:generateContent", `{"contents":[{"role":"user","parts":[{"text":"` + prompt + `"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`, gemini},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, journal := startMeter(t, mock)
			post(t, m.URL()+tc.path, tc.body)
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := meter.Read(journal)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("journal holds %+v\nwant one reply %+v", got, tc.want)
			}
		})
	}
}

// A reply the provider cut mid-way was not delivered whole: nothing is
// journalled for it (the CLI counts nothing for it either).
func TestMeterJournalsNothingForACutReply(t *testing.T) {
	mock := backendtest.StartMock(t)
	for _, tc := range []struct{ name, path, body string }{
		{"anthropic stream", "/v1/messages", `{"model":"claude-sonnet-4-5","stream":true,"messages":[{"role":"user","content":"MOCK_DROP_1"}],"tools":[{"name":"Bash","input_schema":{}}]}`},
		{"gemini sse", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"MOCK_DROP_1"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if resp, err := http.Post(mock+"/_mock/reset", "application/json", nil); err == nil {
				resp.Body.Close()
			}
			m, journal := startMeter(t, mock)
			if resp, err := http.Post(m.URL()+tc.path, "application/json", strings.NewReader(tc.body)); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			_ = m.Close()
			got, err := meter.Read(journal)
			if err != nil || len(got) != 0 || m.Replies() != 0 {
				t.Fatalf("journal of a cut reply: %+v, %v (%d replies)", got, err, m.Replies())
			}
		})
	}
}

// The CLI gets the provider's bytes unchanged, decompressed when the
// provider compressed them, with the path under the upstream's base path;
// the meter reads the same bytes.
func TestMeterPassesRepliesThroughUnchanged(t *testing.T) {
	const stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0,\"output_tokens\":1}}}\r\n\r\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	var gotPath, gotEncoding string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotEncoding = r.URL.Path, r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, stream)
		_ = zw.Close()
	}))
	defer up.Close()
	m, journal := startMeter(t, up.URL+"/anthropic")
	got := post(t, m.URL()+"/v1/messages", `{"model":"claude-haiku-4-5","stream":true}`)
	if got != stream {
		t.Errorf("the CLI got %q\nwant %q", got, stream)
	}
	if gotPath != "/anthropic/v1/messages" || gotEncoding != "gzip" {
		t.Errorf("upstream saw path %q, Accept-Encoding %q; want /anthropic/v1/messages and the transport's own gzip", gotPath, gotEncoding)
	}
	_ = m.Close()
	evs, err := meter.Read(journal)
	want := budget.UsageEvent{Model: "claude-haiku-4-5", InputTokens: 10, OutputTokens: 7}
	if err != nil || len(evs) != 1 || evs[0] != want {
		t.Fatalf("journal: %+v %v; want %+v", evs, err, want)
	}
}

// A journal line cut by a kill mid-write is the last one: it is skipped,
// the rest is read. A bad line before the end is skipped and counted too
// (issue 20: one bad line used to drop the whole journal).
func TestReadJournalSkipsATornLastLine(t *testing.T) {
	dir := t.TempDir()
	good := `{"api":"anthropic","model":"m","input":5,"output":2}` + "\n"
	torn := filepath.Join(dir, "torn.jsonl")
	if err := os.WriteFile(torn, []byte(good+`{"api":"anthr`), 0o600); err != nil {
		t.Fatal(err)
	}
	evs, err := meter.Read(torn)
	if err != nil || len(evs) != 1 || evs[0].Tokens() != 7 {
		t.Fatalf("torn journal: %+v %v", evs, err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`garbage`+"\n"+good), 0o600); err != nil {
		t.Fatal(err)
	}
	if evs, skipped, err := meter.ReadCounted(bad); err != nil || skipped != 1 || len(evs) != 1 || evs[0].Tokens() != 7 {
		t.Fatalf("bad journal: %+v, %d skipped, %v; want the good line read and 1 skipped", evs, skipped, err)
	}
	if evs, err := meter.Read(filepath.Join(dir, "none.jsonl")); err != nil || evs != nil {
		t.Fatalf("missing journal: %+v %v", evs, err)
	}
}

// Read reads regular files only, and only up to MaxJournal: a journal path
// recorded with a call that turned into a FIFO, a device or a directory, or
// grew past any journal's size, is an error, never a hang or an
// allocation of its size.
func TestReadJournalIsBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.jsonl")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(meter.MaxJournal + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir, huge, link} {
		done := make(chan error, 1)
		go func() { _, err := meter.Read(p); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("Read(%s) = nil error; want a refusal", p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Read(%s) hangs", p)
		}
	}
}

// The journal never holds a request's or reply's text, nor its keys.
func TestMeterJournalHoldsNoSecrets(t *testing.T) {
	mock := backendtest.StartMock(t)
	m, journal := startMeter(t, mock)
	req, _ := http.NewRequest(http.MethodPost, m.URL()+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"sk-ant-api03-SECRETSECRET"}]}`))
	req.Header.Set("x-api-key", "sk-ant-api03-KEYKEYKEY")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = m.Close()
	b, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || bytes.Contains(b, []byte("SECRET")) || bytes.Contains(b, []byte("KEYKEY")) {
		t.Fatalf("journal: %s", b)
	}
	if fi, err := os.Stat(journal); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode: %v %v", fi.Mode(), err)
	}
}

// A provider that cannot be reached is answered with a 502 that says why,
// and LastError keeps the cause for the backend (the CLI would otherwise
// report a server error where the connection was refused); a request that
// reaches the provider clears it.
func TestMeterTellsAnUnreachableProviderFromAServerError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	m, _ := startMeter(t, closed)
	resp, err := http.Post(m.URL()+"/v1/messages", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "connection refused") {
		t.Fatalf("unreachable provider: %s %q", resp.Status, body)
	}
	if err := m.LastError(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("LastError = %v, want the refused connection", err)
	}

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusInternalServerError)
	}))
	defer failing.Close()
	m, _ = startMeter(t, failing.URL)
	resp, err = http.Post(m.URL()+"/v1/messages", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || m.LastError() != nil {
		t.Fatalf("a provider's own 500: %s, LastError %v; want the 500 passed on and no transport error", resp.Status, m.LastError())
	}
}
