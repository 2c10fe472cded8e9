package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/meter"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/gateway"
)

// svcKeyVar is the key's variable: set in the service's environment only.
const svcKeyVar = "PURSER_TEST_SVC_KEY"

// startService runs the door's service on a socket in a 0700 directory,
// its environment holding the real key; the test process's own
// environment does not.
func startService(t *testing.T) *gateway.Service {
	t.Helper()
	if os.Getenv(svcKeyVar) != "" {
		t.Fatalf("%s is set in the test's environment; the service's must be the only one", svcKeyVar)
	}
	s, err := gateway.ListenService(filepath.Join(t.TempDir(), "gw", "gateway.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s.Getenv = func(k string) string {
		if k == svcKeyVar {
			return realKey
		}
		return ""
	}
	done := make(chan struct{})
	go func() { _ = s.Serve(context.Background()); close(done) }()
	t.Cleanup(func() { _ = s.Close(); <-done })
	return s
}

// useService points this process's lanes at s until the test ends.
func useService(t *testing.T, s *gateway.Service) {
	gateway.UseService(s.Socket())
	t.Cleanup(func() { gateway.UseService("") })
}

// A lane opened after UseService is the service's: the worker names the
// key, the provider gets its value from the service's environment, and the
// worker's admitter, report and release see each request exactly as on an
// in-process lane.
func TestServiceLaneAdmitsBooksAndHoldsTheKey(t *testing.T) {
	up, upSeen := provider(t, `{"model":"small","usage":{"input_tokens":7,"output_tokens":3}}`)
	s := startService(t)
	useService(t, s)
	ad := &admitter{grant: purser.WireGrant{Model: "small", MaxOutputTokens: 100}}
	var mu sync.Mutex
	var booked []budget.UsageEvent
	l, err := gateway.Open(context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL,
		Key: gateway.Key{Env: svcKeyVar}, Admit: ad, Report: func(ev budget.UsageEvent) { mu.Lock(); booked = append(booked, ev); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if s.Lanes() != 1 {
		t.Fatalf("the service hosts %d lanes; want the worker's one", s.Lanes())
	}
	status, body := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()}, `{"model":"big","max_tokens":4096}`)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	got := upSeen.last(t)
	if got.header.Get("X-Api-Key") != realKey || !strings.Contains(got.body, `"model":"small","max_tokens":100`) {
		t.Errorf("the provider got key %q body %s; want the service's key and the worker's grant", got.header.Get("X-Api-Key"), got.body)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ad.got) != 1 || ad.got[0].Model != "big" || ad.got[0].MaxOutputTokens != 4096 || ad.released.Load() != 1 {
		t.Errorf("admitted %+v released %d; want the request once, released once", ad.got, ad.released.Load())
	}
	if len(booked) != 1 || booked[0].InputTokens != 7 || booked[0].OutputTokens != 3 || booked[0].Model != "small" {
		t.Errorf("booked %+v; want the reply's 7+3 on small, by the time Close returned", booked)
	}
	if st := l.Stats(); st.Requests != 1 || st.Booked != 1 {
		t.Errorf("stats %+v; want one request, booked", st)
	}
	if s.Lanes() != 0 {
		t.Errorf("the service still hosts %d lanes after Close", s.Lanes())
	}
	if status, _ := doErr(l.URL()+"/v1/messages", l.Token()); status == 200 {
		t.Error("a closed lane's token still passes")
	}
}

// doErr is a request that may not connect: status 0 when it does not.
func doErr(url, token string) (int, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"m","max_tokens":5}`))
	req.Header.Set("x-api-key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A worker told to use a service that is not running is refused, told the
// socket and what to run, and no lane opens in-process.
func TestServiceDownRefusesTheLane(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "gateway.sock")
	gateway.UseService(sock)
	t.Cleanup(func() { gateway.UseService("") })
	t.Setenv(svcKeyVar, realKey) // an in-process lane could open: it must not
	l, err := gateway.Open(context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: "http://127.0.0.1:1", Key: gateway.Key{Env: svcKeyVar}})
	if err == nil {
		l.Close()
		t.Fatal("a lane opened with the service down")
	}
	if !errors.Is(err, gateway.ErrServiceDown) || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "purser gateway --socket "+sock) {
		t.Errorf("error %q; want ErrServiceDown naming %s and `purser gateway --socket`", err, sock)
	}
}

// The service's socket is the user's only: 0600 in a 0700 directory; a
// directory others may enter is refused, and a live socket is not taken
// over.
func TestServiceSocketIsPrivate(t *testing.T) {
	s := startService(t)
	fi, err := os.Stat(s.Socket())
	if err != nil {
		t.Fatal(err)
	}
	di, _ := os.Stat(filepath.Dir(s.Socket()))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("socket %04o in dir %04o; want 0600 in 0700", fi.Mode().Perm(), di.Mode().Perm())
	}
	if _, err := gateway.ListenService(s.Socket()); !errors.Is(err, gateway.ErrServiceBusy) {
		t.Errorf("a second service on a live socket: %v; want ErrServiceBusy", err)
	}
	open := t.TempDir()
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.ListenService(filepath.Join(open, "gw.sock")); err == nil || !strings.Contains(err.Error(), open) {
		t.Errorf("a socket in a 0755 directory: %v; want refused, naming it", err)
	}
	if err := gateway.ServiceHasKey(context.Background(), s.Socket(), gateway.Key{Env: svcKeyVar}); err != nil {
		t.Errorf("the service holds %s: %v", svcKeyVar, err)
	}
	err = gateway.ServiceHasKey(context.Background(), s.Socket(), gateway.Key{Env: "PURSER_TEST_NO_SUCH_KEY"})
	if err == nil || !strings.Contains(err.Error(), "PURSER_TEST_NO_SUCH_KEY") {
		t.Errorf("a key the service does not hold: %v; want refused by name", err)
	}
}

// The engine's cut at HARD (the lane's context cancelled in the worker)
// reaches the service's lane: the reply in flight is cut mid-stream with
// purser's error event, the provider's request cancelled, and the input the
// provider started billing booked in the worker.
func TestServiceLaneCutsMidStream(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up, upstreamEnded := slowStream(t, []string{"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10}}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n"}, hold)
	useService(t, startService(t))
	ctx, cancel := context.WithCancelCause(context.Background())
	var mu sync.Mutex
	var booked []budget.UsageEvent
	l, err := gateway.Open(ctx, gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Key: gateway.Key{Env: svcKeyVar},
		Report: func(ev budget.UsageEvent) { mu.Lock(); booked = append(booked, ev); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	req, _ := http.NewRequest("POST", l.URL()+"/v1/messages", strings.NewReader(`{"model":"m","stream":true,"max_tokens":10}`))
	req.Header.Set("x-api-key", l.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line %q", line)
	}
	cancel(&budget.BudgetExhaustedError{Scope: budget.ScopeTask, Metric: budget.Tokens})
	done := make(chan string, 1)
	go func() { rest, _ := io.ReadAll(rd); done <- string(rest) }()
	select {
	case rest := <-done:
		if !strings.Contains(rest, "purser: budget exhausted (") || strings.Contains(rest, "message_delta") {
			t.Errorf("after the cut the agent read %q; want purser's error event and nothing of the rest", rest)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the agent's stream did not end when the worker's call did")
	}
	select {
	case <-upstreamEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's request was not cancelled")
	}
	_ = l.Close()
	if st := l.Stats(); st.Cut != 1 {
		t.Errorf("stats %+v; want one cut", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(booked) != 1 || booked[0].InputTokens != 10 || booked[0].OutputTokens != 0 {
		t.Errorf("booked %+v for the cut reply; want message_start's 10 input tokens", booked)
	}
}

// workerResult is what a worker process (TestServiceWorkerProcess) says of
// its own ledger.
type workerResult struct {
	KeyInEnv           bool
	Admitted, Released int
	In, Out            int64
	Booked             int
	URL, Token         string
}

// TestServiceWorkerProcess is a worker process of the tests below, run as
// a child (PURSER_TEST_WORKER_SOCKET set): it opens a lane on the service
// with a ledger of its own, sends PURSER_TEST_WORKER_N requests, and
// prints what it booked; with PURSER_TEST_WORKER_HANG it then prints its
// lane and waits to be killed.
func TestServiceWorkerProcess(t *testing.T) {
	sock := os.Getenv("PURSER_TEST_WORKER_SOCKET")
	if sock == "" {
		t.Skip("a child of the service tests")
	}
	gateway.UseService(sock)
	var n int
	fmt.Sscan(os.Getenv("PURSER_TEST_WORKER_N"), &n)
	var res workerResult
	var mu sync.Mutex
	ad := &admitter{grant: purser.WireGrant{MaxOutputTokens: 50}}
	l, err := gateway.Open(context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: os.Getenv("PURSER_TEST_WORKER_UPSTREAM"),
		Key: gateway.Key{Env: svcKeyVar}, Admit: ad, Journal: os.Getenv("PURSER_TEST_WORKER_JOURNAL"),
		Report: func(ev budget.UsageEvent) {
			mu.Lock()
			res.In, res.Out, res.Booked = res.In+ev.InputTokens, res.Out+ev.OutputTokens, res.Booked+1
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if status, body := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()}, `{"model":"m","max_tokens":500}`); status != 200 {
			t.Fatalf("status %d %s", status, body)
		}
	}
	if os.Getenv("PURSER_TEST_WORKER_HANG") != "" {
		fmt.Printf("LANE %s %s\n", l.URL(), l.Token())
		select {}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	res.KeyInEnv = os.Getenv(svcKeyVar) != ""
	res.Admitted, res.Released = len(ad.got), int(ad.released.Load())
	mu.Unlock()
	b, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", b)
}

// worker starts a worker process on the service's socket, its environment
// without the key.
func worker(t *testing.T, sock, upstream string, n int, extra ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestServiceWorkerProcess$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, svcKeyVar+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PURSER_TEST_WORKER_SOCKET="+sock, "PURSER_TEST_WORKER_UPSTREAM="+upstream, fmt.Sprint("PURSER_TEST_WORKER_N=", n))
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

func resultOf(t *testing.T, out []byte) workerResult {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		if b, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r workerResult
			if err := json.Unmarshal([]byte(b), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("the worker said no result:\n%s", out)
	return workerResult{}
}

// Two worker processes share one service: each one's requests are admitted
// and booked exactly in its own ledger, neither holds the provider key,
// and the provider saw the real key on every request.
func TestServiceTwoWorkerProcesses(t *testing.T) {
	up, upSeen := provider(t, `{"model":"m","usage":{"input_tokens":11,"output_tokens":4}}`)
	s := startService(t)
	counts := []int{3, 5}
	outs := make([][]byte, len(counts))
	errs := make([]error, len(counts))
	var wg sync.WaitGroup
	for i, n := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = worker(t, s.Socket(), up.URL, n).CombinedOutput()
		}()
	}
	wg.Wait()
	for i, n := range counts {
		if errs[i] != nil {
			t.Fatalf("worker %d: %v\n%s", i, errs[i], outs[i])
		}
		r := resultOf(t, outs[i])
		if r.KeyInEnv {
			t.Errorf("worker %d holds %s in its environment", i, svcKeyVar)
		}
		if r.Admitted != n || r.Released != n || r.Booked != n || r.In != int64(11*n) || r.Out != int64(4*n) {
			t.Errorf("worker %d ledger %+v; want %d admitted, released and booked, %d in, %d out", i, r, n, 11*n, 4*n)
		}
	}
	upSeen.mu.Lock()
	defer upSeen.mu.Unlock()
	if len(upSeen.reqs) != 8 {
		t.Fatalf("the provider saw %d requests; want 8", len(upSeen.reqs))
	}
	for _, r := range upSeen.reqs {
		if r.header.Get("X-Api-Key") != realKey {
			t.Fatalf("the provider got key %q; want the service's", r.header.Get("X-Api-Key"))
		}
	}
}

// A worker killed takes its lanes with it: the service closes them, their
// tokens no longer pass, and the journal, written by the service, keeps
// the replies the provider finished.
func TestServiceClosesAKilledWorkersLanes(t *testing.T) {
	up, upSeen := provider(t, `{"model":"m","usage":{"input_tokens":11,"output_tokens":4}}`)
	s := startService(t)
	journal := filepath.Join(t.TempDir(), "wire.jsonl")
	cmd := worker(t, s.Socket(), up.URL, 2, "PURSER_TEST_WORKER_HANG=1", "PURSER_TEST_WORKER_JOURNAL="+journal)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var url, token string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "LANE" {
			url, token = f[1], f[2]
			break
		}
	}
	if url == "" {
		t.Fatal("the worker said no lane")
	}
	if s.Lanes() != 1 {
		t.Fatalf("the service hosts %d lanes; want the worker's", s.Lanes())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for s.Lanes() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.Lanes() != 0 {
		t.Fatal("the killed worker's lane is still open on the service")
	}
	if status, _ := doErr(url+"/v1/messages", token); status == 200 {
		t.Error("the killed worker's token still passes")
	}
	if upSeen.count() != 2 {
		t.Errorf("the provider saw %d requests; want the worker's 2", upSeen.count())
	}
	evs, err := meter.Read(journal)
	if err != nil || len(evs) != 2 || evs[0].InputTokens != 11 || evs[1].OutputTokens != 4 {
		t.Errorf("journal %+v (%v); want the two finished replies", evs, err)
	}
}

// A worker killed while a reply is in flight on its lane: the service cuts
// the reply (the agent's stream ends, the provider's request is cancelled)
// and closes the lane, whose token then passes nothing.
func TestServiceCutsAKilledWorkersReplyInFlight(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up, upstreamEnded := slowStream(t, []string{"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10}}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n"}, hold)
	s := startService(t)
	cmd := worker(t, s.Socket(), up.URL, 0, "PURSER_TEST_WORKER_HANG=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var url, token string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "LANE" {
			url, token = f[1], f[2]
			break
		}
	}
	if url == "" {
		t.Fatal("the worker said no lane")
	}
	// This test plays the agent in the box: its reply is in flight when
	// the worker dies.
	req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(`{"model":"m","stream":true,"max_tokens":10}`))
	req.Header.Set("x-api-key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line %q", line)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { rest, _ := io.ReadAll(rd); done <- string(rest) }()
	select {
	case rest := <-done:
		// The lane closes at once, as an in-process lane's Close does:
		// the connection ends, whether or not the error event made it.
		if strings.Contains(rest, "message_delta") {
			t.Errorf("after the worker died the agent read %q; want nothing of the rest of the reply", rest)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the agent's stream did not end when its worker died")
	}
	select {
	case <-upstreamEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's request was not cancelled")
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Lanes() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.Lanes() != 0 {
		t.Fatal("the killed worker's lane is still open on the service")
	}
	if status, _ := doErr(url+"/v1/messages", token); status == 200 {
		t.Error("the killed worker's token still passes")
	}
}

// A service lane serves the box's unix socket too (the service makes it,
// 0600, where the worker says), and the lane's counts and Carried come
// from the service; its Stats after Close are the last the service said.
func TestServiceLaneServesTheBoxSocket(t *testing.T) {
	up, _ := provider(t, `{"model":"m","usage":{"input_tokens":1,"output_tokens":1}}`)
	useService(t, startService(t))
	l, err := gateway.Open(context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Key: gateway.Key{Env: svcKeyVar}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sock := filepath.Join(t.TempDir(), "door.sock")
	if err := l.ServeUnix(sock); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the box's socket: %v %v; want 0600", fi, err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequest("POST", "http://127.0.0.1:4141/v1/messages", strings.NewReader(`{"model":"m","max_tokens":1}`))
	req.Header.Set("x-api-key", l.Token())
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if l.Carried() == 0 || l.LastError() != nil {
		t.Errorf("carried %d, last error %v; want the reply's bytes and none", l.Carried(), l.LastError())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Requests != 1 || st.Booked != 1 {
		t.Errorf("stats after Close %+v; want the service's last: one request, booked", st)
	}
	if _, err := os.Stat(sock); err == nil {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			t.Error("the box's socket still answers after the lane closed")
		}
	}
}
