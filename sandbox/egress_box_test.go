//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// egressHelper runs in the box: "proxyget URL" fetches URL through the
// proxy HTTP_PROXY names (Go's own ProxyFromEnvironment never proxies
// loopback, where the tests' servers are); "connect HOST:PORT" opens a
// CONNECT tunnel through HTTPS_PROXY and sends a GET / through it. Both
// print the status line's code and the body.
func egressHelper(name string, args []string) int {
	env := "HTTP_PROXY"
	if name == "connect" {
		env = "HTTPS_PROXY"
	}
	proxy, err := url.Parse(os.Getenv(env))
	if err != nil || proxy.Host == "" {
		fmt.Println("no proxy in", env, os.Getenv(env))
		return 1
	}
	if name == "proxyget" {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
		resp, err := c.Get(args[0])
		if err != nil {
			fmt.Println("failed:", err)
			return 1
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s", resp.StatusCode, b)
		return 0
	}
	code, body, err := connectGet(proxy.Host, args[0])
	if err != nil {
		fmt.Println("failed:", err)
		return 1
	}
	fmt.Printf("%d %s", code, body)
	return 0
}

// connectGet dials the proxy at proxyAddr, asks it to CONNECT to dest and,
// if it does, sends GET / through the tunnel; it returns the status code
// and body of the proxy's answer (a refusal) or of the server's.
func connectGet(proxyAddr, dest string) (int, string, error) {
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", dest)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// namedServer is an HTTP server on the host's loopback that answers with
// its name.
func namedServer(t testing.TB, name string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "%s says hello", name)
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// A box whose Allow lists a destination reaches it through Purser's egress
// proxy, by CONNECT and by a plain request; an unlisted one is refused with
// a 403 naming it and the line to add; a direct connection still reaches
// nothing; the door works beside the proxy.
func TestAllowReachesTheListedDestinationOnly(t *testing.T) {
	w := newWorld(t)
	allowed, other := namedServer(t, "registry"), namedServer(t, "elsewhere")
	door := doorServer(t)
	b := w.box
	b.Allow = []string{allowed}
	b.Door = &Door{Socket: door, Port: 18082}

	if r := w.inBox(t, b, "connect", allowed); r.stdout != "200 registry says hello" {
		t.Errorf("CONNECT to the listed %s: %q %q (exit %d)", allowed, r.stdout, r.stderr, r.code)
	}
	if r := w.inBox(t, b, "proxyget", "http://"+allowed+"/x"); r.stdout != "200 registry says hello" {
		t.Errorf("plain GET of the listed %s: %q %q (exit %d)", allowed, r.stdout, r.stderr, r.code)
	}
	for _, helper := range []string{"connect", "proxyget"} {
		arg := other
		if helper == "proxyget" {
			arg = "http://" + other + "/"
		}
		r := w.inBox(t, b, helper, arg)
		want := fmt.Sprintf(`network: {allow: [%q]}`, other)
		if !strings.HasPrefix(r.stdout, "403 ") || !strings.Contains(r.stdout, "may not reach "+other) || !strings.Contains(r.stdout, want) {
			t.Errorf("%s to the unlisted %s: %q %q, want a 403 naming it and saying %s", helper, other, r.stdout, r.stderr, want)
		}
	}
	if r := w.inBox(t, b, "dial", allowed); r.code == 0 || !strings.Contains(r.stdout, "refused") {
		t.Errorf("the box reached the listed %s without the proxy: %q %q", allowed, r.stdout, r.stderr)
	}
	if r := w.inBox(t, b, "get", b.Door.URL()+"/v1"); r.stdout != "door says hello to /v1" {
		t.Errorf("the door beside the proxy: %q %q (exit %d)", r.stdout, r.stderr, r.code)
	}
	if r := w.inBox(t, b, "resolve", "example.com"); r.code == 0 {
		t.Errorf("a box with an allow-list resolved a name: %q", r.stdout)
	}
	counts := EgressCounts()
	if c := counts[allowed]; c.Allowed < 2 || c.BytesDown == 0 || c.BytesUp == 0 {
		t.Errorf("counts for %s: %+v", allowed, c)
	}
	if c := counts[other]; c.Refused < 2 || c.Allowed != 0 {
		t.Errorf("counts for %s: %+v", other, c)
	}
}

// doorServer serves HTTP on a unix socket, as Purser's door does.
func doorServer(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "door")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "door says hello to %s", r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return sock
}
