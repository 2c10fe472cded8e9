package config_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// gateway: {socket: PATH} names the door's shared service, relative to
// purser.yaml's folder; an empty socket or an unknown key is refused,
// located.
func TestGatewaySocket(t *testing.T) {
	p, err := loadBoxProject(t, "gateway: {socket: run/gw.sock}\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(p.Dir, "run", "gw.sock"); p.GatewaySocket != want {
		t.Errorf("socket %q; want %q", p.GatewaySocket, want)
	}
	if p, err = loadBoxProject(t, "gateway: {socket: /run/user/1/purser/gateway.sock}\n"); err != nil || p.GatewaySocket != "/run/user/1/purser/gateway.sock" {
		t.Errorf("absolute socket: %q, %v", p.GatewaySocket, err)
	}
	if p, err = loadBoxProject(t, "sandbox: off\n"); err != nil || p.GatewaySocket != "" {
		t.Errorf("no gateway: %q, %v; want in-process lanes", p.GatewaySocket, err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"gateway: {}\n", "gateway.socket: the door's service socket must be a path"},
		{"gateway: {socket: \"\"}\n", "gateway.socket: the door's service socket must be a path"},
		{"gateway: {sock: x}\n", `purser.yaml:1:11: unknown field "sock" (did you mean "socket"?)`},
		{"gateway: x\n", "purser.yaml:1:"},
	} {
		if _, err := loadBoxProject(t, c.yaml); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.yaml, err, c.want)
		}
	}
}
