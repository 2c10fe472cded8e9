package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/gateway"
)

// The figures of docs/benchmarks.md ("Purser's door"): run with
// PURSER_BENCH=1 go test -run 'TestDoorBench' -v ./gateway.
func requireBench(t *testing.T) {
	if os.Getenv("PURSER_BENCH") == "" {
		t.Skip("PURSER_BENCH=1 runs the door's benchmarks")
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// Added latency per request on loopback: the same small streamed reply
// fetched directly and through the door (admitted, metered, journalled).
func TestDoorBenchLatency(t *testing.T) {
	requireBench(t)
	reply := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, reply)
	}))
	defer up.Close()
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Journal: t.TempDir() + "/j.jsonl",
		Admit: &admitter{grant: purser.WireGrant{MaxOutputTokens: 100}}, Report: func(budget.UsageEvent) {}})
	body := `{"model":"m","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 4000) + `"}]}`
	measure := func(url, key string) []time.Duration {
		client := &http.Client{}
		var out []time.Duration
		for i := range 3000 {
			req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(body))
			req.Header.Set("x-api-key", key)
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
	direct := measure(up.URL, "k")
	door := measure(l.URL(), l.Token())
	t.Logf("direct: p50 %v p99 %v; door: p50 %v p99 %v; added p50 %v p99 %v",
		percentile(direct, .5), percentile(direct, .99), percentile(door, .5), percentile(door, .99),
		percentile(door, .5)-percentile(direct, .5), percentile(door, .99)-percentile(direct, .99))
}

// capAdmitter is a token cap in front of the door: with reserve, each
// request reserves its input and output bound before it is forwarded
// (what the door's admission lets the engine do); without, it only checks
// what was booked so far (check-then-forward, as a proxy that learns of
// spend only from replies does). Booked usage settles the reservation.
type capAdmitter struct {
	mu       sync.Mutex
	cap      int64
	used     int64
	reserved int64
	reserve  bool
}

func (a *capAdmitter) AdmitWire(_ context.Context, r purser.WireRequest) (purser.WireGrant, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.reserve {
		if a.used >= a.cap {
			return purser.WireGrant{}, errors.New("cap reached")
		}
		return purser.WireGrant{}, nil
	}
	left := a.cap - a.used - a.reserved
	if left <= r.InputTokens {
		return purser.WireGrant{}, errors.New("cap reached")
	}
	out := min(r.MaxOutputTokens, left-r.InputTokens)
	need := r.InputTokens + out
	a.reserved += need
	return purser.WireGrant{MaxOutputTokens: out, Release: func() {
		a.mu.Lock()
		a.reserved -= need
		a.mu.Unlock()
	}}, nil
}

func (a *capAdmitter) book(ev budget.UsageEvent) {
	a.mu.Lock()
	a.used += ev.Tokens()
	a.mu.Unlock()
}

// 64 concurrent streaming requests near a cap: the door with per-request
// reservation against check-then-forward. The provider honours max_tokens
// and streams its output over 200 ms.
func TestDoorBenchOvershoot(t *testing.T) {
	requireBench(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var maxTok int64 = 1000
		if i := strings.Index(string(b), `"max_tokens":`); i >= 0 {
			_, _ = fmt.Sscanf(string(b[i+len(`"max_tokens":`):]), "%d", &maxTok)
		}
		in := int64(len(b)+3) / 4
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":%d}}}\n\n", in)
		w.(http.Flusher).Flush()
		time.Sleep(200 * time.Millisecond)
		fmt.Fprintf(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":%d}}\n\n", maxTok)
	}))
	defer up.Close()
	const capTokens = 20_000
	body := `{"model":"m","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 3900) + `"}]}`
	for _, reserve := range []bool{true, false} {
		adm := &capAdmitter{cap: capTokens, reserve: reserve}
		l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Admit: adm, Report: adm.book})
		var wg sync.WaitGroup
		refused := 0
		var mu sync.Mutex
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, _ := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()}, body)
				if status != 200 {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		_ = l.Close()
		name := "door (reserve per request)"
		if !reserve {
			name = "check-then-forward"
		}
		t.Logf("%s: cap %d, spent %d (%+.1f%%), %d of 64 refused", name, capTokens, adm.used,
			100*float64(adm.used-capTokens)/capTokens, refused)
	}
}

// 1,000 concurrent streams through one lane: each a 20-event reply over
// about a second; all booked, the wall time and the heap's peak said.
func TestDoorBenchThousandStreams(t *testing.T) {
	requireBench(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10}}}\n\n")
		for range 20 {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", strings.Repeat("z", 200))
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n")
	}))
	defer up.Close()
	up.Config.SetKeepAlivesEnabled(true)
	var booked sync.WaitGroup
	const n = 1000
	booked.Add(n)
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Report: func(budget.UsageEvent) { booked.Done() }})
	var peak uint64
	stop := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", l.URL()+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"stream":true}`))
			req.Header.Set("x-api-key", l.Token())
			resp, err := client.Do(req)
			if err != nil {
				failed.Add(1)
				booked.Done()
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	booked.Wait()
	took := time.Since(start)
	close(stop)
	t.Logf("%d concurrent streams (1 s each): all done in %v, %d failed, heap in use at its peak %.1f MB", n, took.Round(time.Millisecond), failed.Load(), float64(peak)/(1<<20))
}
