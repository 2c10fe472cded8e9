package app

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/gateway"
)

// GatewayEnv is the environment variable that names the door's shared
// service (`purser gateway`) a process opens its lanes on.
const GatewayEnv = "PURSER_GATEWAY"

// GatewayFlagHelp is the --gateway flag's help, the rule in one line.
const GatewayFlagHelp = "open the door's lanes on the shared service (purser gateway) at this socket, which holds the provider keys; \"off\": in this process (default: $PURSER_GATEWAY, else purser.yaml's gateway.socket, else in this process)"

// GatewaySocket is the door's shared service a process opens its lanes on,
// by one rule: the --gateway flag, else $PURSER_GATEWAY, else proj's
// purser.yaml gateway.socket; the first that is said wins, and "off" there
// says in-process. "" is in-process lanes (the process holds the keys). A
// relative flag or variable is taken from the working directory.
func GatewaySocket(flag string, proj *config.Project) (string, error) {
	v := flag
	if v == "" {
		v = os.Getenv(GatewayEnv)
	}
	if v == "off" {
		return "", nil
	}
	if v == "" {
		if proj == nil {
			return "", nil
		}
		return proj.GatewaySocket, nil
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return "", BadInput(fmt.Errorf("the door's service socket %q: %w", v, err))
	}
	return abs, nil
}

// UseGateway points every lane this process opens from now on at the
// socket GatewaySocket names (gateway.UseService), and returns it ("" for
// in-process lanes). A service that is down refuses each call's lane,
// naming the socket; no lane falls back to this process.
func UseGateway(flag string, proj *config.Project) (string, error) {
	s, err := GatewaySocket(flag, proj)
	if err != nil {
		return "", err
	}
	gateway.UseService(s)
	return s, nil
}
