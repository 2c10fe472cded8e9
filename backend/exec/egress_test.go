package exec_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	pexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/sandbox"
)

// A boxed exec agent whose sandbox lists a registry downloads from it
// through Purser's egress proxy; the proxy variables are set for it.
func TestBoxedExecReachesTheAllowList(t *testing.T) {
	requireBox(t)
	if _, err := osexec.LookPath("curl"); err != nil {
		t.Skip("no curl to play the agent's download")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprint(rw, "package tarball") }))
	defer srv.Close()
	registry := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	prog := filepath.Join(dir, "agent.sh")
	script := "#!/bin/sh\necho \"proxy=$HTTPS_PROXY no=$NO_PROXY\"\ncurl -sS --max-time 10 --noproxy '' http://" + registry + "/\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := pexec.NewOptions().(*pexec.Options)
	opts.Command = []string{prog}
	opts.SetSandbox(backend.SandboxConfig{Setting: sandbox.Setting{Mode: sandbox.ModeOn, Allow: []string{registry}}, Homes: filepath.Join(dir, "boxes")})
	b, err := pexec.New(purser.BackendSpec{Type: "exec", Dir: dir, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var c collector
	res, err := b.Call(context.Background(), purser.CallRequest{TaskID: "t1", Workspace: ws, Prompt: "p"}, c.report)
	if err != nil {
		t.Fatalf("call: %v\n%s", err, res.Text)
	}
	for _, want := range []string{"proxy=http://127.0.0.1:3128 no=127.0.0.1,localhost", "package tarball"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Text)
		}
	}
}
