package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/backendtest"
)

// keysSeen is a relay in front of the mock provider that records the key
// each request carried.
func keysSeen(t *testing.T, mock string) (string, func() []string) {
	u, err := url.Parse(mock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys []string
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), keys...) }
}

// envWithout is the test's environment without the variables named.
func envWithout(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// doorProject writes a project whose one type: agent task reaches upstream
// through the door, its key named $PURSER_TEST_REAL_KEY.
func doorProject(t *testing.T, upstream string) string { return doorProjectBoxed(t, upstream, "off") }

// doorProjectBoxed is doorProject with purser.yaml's sandbox: set to box.
func doorProjectBoxed(t *testing.T, upstream, box string) string {
	dir := t.TempDir()
	script, err := filepath.Abs("../../backend/agent/testdata/agent.py")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"agent.py":    string(b),
		"ws/.keep":    "",
		"purser.yaml": "sandbox: off\n",
		"task.yaml": fmt.Sprintf(`id: door
goal: write it MOCK_TOOL
workspace: ./ws
backend:
  type: agent
  wire: anthropic
  command: [%q, "{prompt}"]
  model: claude-sonnet-4-5
  models: {standard: claude-sonnet-4-5}
  upstream: %s
  key: {env: PURSER_TEST_REAL_KEY}
validators:
  - {name: t, run: "true"}
budget:
  hard: {maxIterations: 1, tokens: 100000}
`, filepath.Join(dir, "agent.py"), upstream),
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Two `purser run` processes share one `purser gateway`: each task is DONE
// with its own ledger exact (the agent's two requests, booked from the
// service's lane in the run's database), the provider saw only the
// service's key, never a scoped token (the runs hold no key); with the
// service stopped, a run is refused, naming the socket and what to run.
func TestTwoRunsShareTheDoorsService(t *testing.T) {
	mock := backendtest.StartMock(t)
	upstream, seen := keysSeen(t, mock)
	bin := buildPurser(t)
	const realKey = "sk-ant-held-by-the-service-only"
	sock := filepath.Join(t.TempDir(), "gw", "gateway.sock")
	svc, svcErr := startGatewayService(t, bin, sock, realKey)
	// The runs hold no provider key at all: the type: agent backend's own
	// check asks the service whether it holds $PURSER_TEST_REAL_KEY.
	runEnv := func(dir string) []string {
		return append(envWithout("PURSER_TEST_REAL_KEY", "PURSER_GATEWAY", "XDG_STATE_HOME"),
			"XDG_STATE_HOME="+filepath.Join(dir, ".state"))
	}
	dirs := []string{doorProject(t, upstream), doorProject(t, upstream)}
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = inDir(bin, dir, runEnv(dir), "run", "--gateway", sock, filepath.Join(dir, "task.yaml"))
		}()
	}
	wg.Wait()
	for i, dir := range dirs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v\n%s\nservice: %s", i, errs[i], outs[i], svcErr.String())
		}
		if !strings.Contains(string(outs[i]), "the door's lanes open on the service at "+sock) {
			t.Errorf("run %d did not say it uses the service:\n%s", i, outs[i])
		}
		status := exec.Command(bin, "status", "--json")
		status.Dir, status.Env = dir, runEnv(dir)
		out, err := status.Output()
		var got struct{ Tasks []sharedTask }
		if err != nil || json.Unmarshal(out, &got) != nil || len(got.Tasks) != 1 {
			t.Fatalf("status %d: %v %s", i, err, out)
		}
		if tk := got.Tasks[0]; tk.Status != "DONE" || tk.Budget.UsedTokens != 5500+60+50+3 {
			t.Errorf("run %d: task %+v; want DONE with 5613 tokens, booked from the service's lane", i, tk)
		}
	}
	keys := seen()
	if len(keys) != 4 {
		t.Errorf("the provider saw %d requests; want the two agents' 2 each", len(keys))
	}
	for _, k := range keys {
		if k != realKey {
			t.Errorf("the provider got key %q; want only the service's", k)
		}
	}
	if strings.Contains(svcErr.String(), realKey) {
		t.Error("the service printed its key")
	}

	// check names the door and asks the service for the key, by name.
	out, err := inDir(bin, dirs[0], runEnv(dirs[0]), "check", "--gateway", sock, filepath.Join(dirs[0], "task.yaml"))
	if err != nil || !strings.Contains(string(out), "door        the service at "+sock+" (purser gateway), which holds $PURSER_TEST_REAL_KEY") {
		t.Errorf("check: %v\n%s", err, out)
	}

	// The service stopped: the run is refused, the socket named, and
	// nothing reaches the provider.
	_ = svc.Process.Signal(os.Interrupt)
	_ = svc.Wait()
	fresh := doorProject(t, upstream)
	out, _ = inDir(bin, fresh, runEnv(fresh), "run", "--gateway", sock, filepath.Join(fresh, "task.yaml"))
	if !strings.Contains(string(out), "purser gateway --socket "+sock) {
		t.Errorf("a run with the service down said:\n%s\nwant the socket and `purser gateway --socket`", out)
	}
	if n := len(seen()); n != 4 {
		t.Errorf("with the service down the provider saw %d more requests", n-4)
	}
	out, _ = inDir(bin, dirs[0], runEnv(dirs[0]), "check", "--gateway", sock, filepath.Join(dirs[0], "task.yaml"))
	// The runs hold no key, so the backend's own check already asks the
	// service, and says it does not answer and what to run.
	if !strings.Contains(string(out), "does not answer") || !strings.Contains(string(out), "purser gateway --socket "+sock) {
		t.Errorf("check with the service down:\n%s", out)
	}
}

// inDir runs purser in dir with env, its output combined.
func inDir(bin, dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	return cmd.CombinedOutput()
}

// startGatewayService starts `purser gateway --socket sock` with key as
// $PURSER_TEST_REAL_KEY in its environment, and waits for its socket.
func startGatewayService(t *testing.T, bin, sock, key string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	svc := exec.Command(bin, "gateway", "--socket", sock)
	svc.Env = append(envWithout("PURSER_TEST_REAL_KEY", "PURSER_GATEWAY"), "PURSER_TEST_REAL_KEY="+key)
	svcErr := &syncBuffer{}
	svc.Stderr = svcErr
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Process.Kill(); _ = svc.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return svc, svcErr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not listen: %s", svcErr.String())
		}
	}
}

// Two `purser worker` processes on one SQLite queue share one `purser
// gateway`: every task is DONE with its ledger exact, and the provider got
// only the service's key on each of the agents' requests.
func TestWorkersShareTheDoorsService(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two worker processes and the service")
	}
	mock := backendtest.StartMock(t)
	upstream, seen := keysSeen(t, mock)
	bin := buildPurser(t)
	const realKey = "sk-ant-held-by-the-service-only"
	sock := filepath.Join(t.TempDir(), "gw", "gateway.sock")
	startGatewayService(t, bin, sock, realKey)
	dir := doorProject(t, upstream)
	t.Setenv("PURSER_TEST_REAL_KEY", "sk-placeholder-in-the-worker") // the backend's own check (docs/gateway.md)
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, ".state"))
	t.Setenv("PURSER_GATEWAY", "")
	task, err := os.ReadFile(filepath.Join(dir, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []string
	for i := range 4 {
		name := fmt.Sprintf("task%d.yaml", i)
		body := strings.Replace(strings.Replace(string(task), "id: door", fmt.Sprintf("id: door%d", i), 1), "workspace: ./ws", fmt.Sprintf("workspace: ./ws%d", i), 1)
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("ws%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, name)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.yaml"), []byte("hard: {tokens: 1000000, maxIterations: 100}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "queue.db")
	submit(t, bin, dir, db, tasks)
	var workers []*workerProc
	for i := range 2 {
		workers = append(workers, startWorker(t, bin, dir, db, fmt.Sprint("w", i), nil, "--gateway", sock, "--poll", "100ms", "--drain"))
	}
	for _, w := range workers {
		w.wait(t, time.Now().Add(2*time.Minute))
		if !strings.Contains(w.out.String(), "the door's lanes open on the service at "+sock) {
			t.Errorf("worker %s did not say it uses the service:\n%s", w.name, w.out.String())
		}
	}
	out, err := exec.Command(bin, "status", "--json", "--db", db).Output()
	var got struct{ Tasks []sharedTask }
	if err != nil || json.Unmarshal(out, &got) != nil || len(got.Tasks) != 4 {
		t.Fatalf("status: %v %s", err, out)
	}
	for _, tk := range got.Tasks {
		if tk.Status != "DONE" || tk.Budget.UsedTokens != 5500+60+50+3 {
			t.Errorf("task %+v; want DONE with 5613 tokens, booked from the service's lanes", tk)
		}
	}
	keys := seen()
	if len(keys) != 8 {
		t.Errorf("the provider saw %d requests; want the four agents' 2 each", len(keys))
	}
	for _, k := range keys {
		if k != realKey {
			t.Errorf("the provider got key %q; want only the service's", k)
		}
	}
}

// A boxed agent reaches the service's lane through the unix socket the
// service binds where the run says, relayed into the box: DONE, its ledger
// exact, the provider given the service's key only.
func TestABoxedRunUsesTheDoorsService(t *testing.T) {
	requireBox(t)
	mock := backendtest.StartMock(t)
	upstream, seen := keysSeen(t, mock)
	bin := buildPurser(t)
	const realKey = "sk-ant-held-by-the-service-only"
	sock := filepath.Join(t.TempDir(), "gw", "gateway.sock")
	startGatewayService(t, bin, sock, realKey)
	dir := doorProjectBoxed(t, upstream, "on")
	env := append(envWithout("PURSER_TEST_REAL_KEY", "PURSER_GATEWAY", "XDG_STATE_HOME"),
		"PURSER_TEST_REAL_KEY=sk-placeholder-in-the-run", "XDG_STATE_HOME="+filepath.Join(dir, ".state"))
	if out, err := inDir(bin, dir, env, "run", "--gateway", sock, filepath.Join(dir, "task.yaml")); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	status := exec.Command(bin, "status", "--json")
	status.Dir, status.Env = dir, env
	out, err := status.Output()
	var got struct{ Tasks []sharedTask }
	if err != nil || json.Unmarshal(out, &got) != nil || len(got.Tasks) != 1 {
		t.Fatalf("status: %v %s", err, out)
	}
	if tk := got.Tasks[0]; tk.Status != "DONE" || tk.Budget.UsedTokens != 5500+60+50+3 {
		t.Errorf("task %+v; want DONE with 5613 tokens", tk)
	}
	if keys := seen(); len(keys) != 2 || keys[0] != realKey || keys[1] != realKey {
		t.Errorf("the provider got keys %q; want the service's, twice", keys)
	}
}
