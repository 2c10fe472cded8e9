package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/gateway"
)

// The added latency of a lane of the door's service over an in-process
// lane (docs/benchmarks.md, "The door as a shared service"): the same small
// streamed reply, admitted, reported and released through the worker's
// control connection, against the same admitter in-process. Run with
// PURSER_BENCH=1 go test -run TestDoorBenchServiceLatency -v ./gateway.
func TestDoorBenchServiceLatency(t *testing.T) {
	requireBench(t)
	reply := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, reply)
	}))
	defer up.Close()
	body := `{"model":"m","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 4000) + `"}]}`
	measure := func(l *gateway.Lane) []time.Duration {
		client := &http.Client{}
		var out []time.Duration
		for i := range 3000 {
			req, _ := http.NewRequest("POST", l.URL()+"/v1/messages", strings.NewReader(body))
			req.Header.Set("x-api-key", l.Token())
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if i >= 200 { // warm
				out = append(out, time.Since(start))
			}
		}
		return out
	}
	cfg := func() gateway.LaneConfig {
		return gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Key: gateway.Key{Env: svcKeyVar}, Journal: t.TempDir() + "/j.jsonl",
			Admit: &admitter{grant: purser.WireGrant{MaxOutputTokens: 100}}, Report: func(budget.UsageEvent) {}}
	}
	t.Setenv(svcKeyVar, realKey)
	local := open(t, context.Background(), cfg())
	inProcess := measure(local)
	os.Unsetenv(svcKeyVar)
	useService(t, startService(t))
	remote, err := gateway.Open(context.Background(), cfg())
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	service := measure(remote)
	t.Logf("in-process lane: p50 %v p99 %v; service lane: p50 %v p99 %v; added p50 %v p99 %v",
		percentile(inProcess, .5), percentile(inProcess, .99), percentile(service, .5), percentile(service, .99),
		percentile(service, .5)-percentile(inProcess, .5), percentile(service, .99)-percentile(inProcess, .99))
}
