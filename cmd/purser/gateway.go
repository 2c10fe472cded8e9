package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/gateway"
)

func newGatewayCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "gateway [--socket PATH]",
		Short: "Serve Purser's door as a shared service: it holds the provider keys for the workers of this user",
		Long: `Runs the door (the gateway every model request of an agent passes) as one
long-running service for the worker processes and runs of this user. It holds
the provider keys, read from its own environment (or the key files the
backends name), and hosts each call's lane: its 127.0.0.1 port and unix
socket, its scoped token. Each lane's admission, usage and cut at the HARD
cap stay with the worker's budget, over the worker's control connection to
--socket; the worker names a key, never holds it. A lane closes, and its
token dies, when its call ends or its worker's connection drops.

The socket: --socket, else purser.yaml's gateway.socket, else
$XDG_RUNTIME_DIR/purser/gateway.sock (else in Purser's state directory). It
is made 0600 in a 0700 directory. Workers and runs use the service when told
to by --gateway PATH, else $PURSER_GATEWAY, else purser.yaml's
gateway: {socket: PATH}; one told to use a service that is down refuses the
call, naming the socket. Stop the service with SIGINT or SIGTERM: the lanes
it hosts close.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				socket = projectGatewaySocket()
			}
			s, err := gateway.ListenService(socket)
			if err != nil {
				return badInput(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "purser gateway: serving the door on %s; the keys are this process's (its environment and key files)\n", s.Socket())
			err = s.Serve(cmd.Context())
			fmt.Fprintf(cmd.ErrOrStderr(), "purser gateway: stopped; the lanes it hosted are closed\n")
			return err
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the control socket workers open lanes on (default: purser.yaml's gateway.socket, else "+gateway.DefaultSocket()+")")
	return cmd
}

// projectGatewaySocket is the working directory's purser.yaml's
// gateway.socket, else the default socket.
func projectGatewaySocket() string {
	if wd, err := os.Getwd(); err == nil {
		if p, err := config.FindProject(wd); err == nil && p.GatewaySocket != "" {
			return p.GatewaySocket
		}
	}
	return gateway.DefaultSocket()
}

// useGateway points the command's lanes at the door's service, by
// app.GatewaySocket's rule, and says so on stderr when it does.
func useGateway(cmd *cobra.Command, flag string, proj *config.Project) error {
	sock, err := app.UseGateway(flag, proj)
	if err != nil {
		return err
	}
	if sock != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "purser: the door's lanes open on the service at %s (purser gateway), which holds the keys\n", sock)
	}
	return nil
}

// useGatewayFirst sets the door's service from --gateway or
// $PURSER_GATEWAY before the task files are read, so that a backend's own
// check asks the service for its key (a process using a service holds
// none); purser.yaml's gateway: is known only once they are read
// (useGateway, after).
func useGatewayFirst(flag string) error {
	_, err := app.UseGateway(flag, nil)
	return err
}

// keyName finds a provider key's variable in a backend's key or metering
// line ("$ANTHROPIC_API_KEY, held at the door…", "…holds the key $X…").
var keyName = regexp.MustCompile(`(?:^|holds the key )\$([A-Za-z_][A-Za-z0-9_]*)`)

// describeDoor says which door a backend's lanes use: in this process, or
// the service at its socket, asked (by name, never value) whether it holds
// the key the key line names. keyLine is the backend's key or metering
// line ("" when it opens no lane).
func describeDoor(out io.Writer, flag string, proj *config.Project, keyLine string) {
	if keyLine == "" || strings.HasPrefix(keyLine, "none") || !strings.Contains(keyLine, "door") {
		return
	}
	sock, err := app.GatewaySocket(flag, proj)
	switch {
	case err != nil:
		fmt.Fprintf(out, "  door        %v\n", err)
		return
	case sock == "":
		fmt.Fprintf(out, "  door        in-process: each call's lane is in the purser process, which holds the key\n")
		return
	}
	m := keyName.FindStringSubmatch(keyLine)
	if m == nil {
		fmt.Fprintf(out, "  door        the service at %s (purser gateway)\n", sock)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = gateway.ServiceHasKey(ctx, sock, gateway.Key{Env: m[1]})
	switch {
	case err == nil:
		fmt.Fprintf(out, "  door        the service at %s (purser gateway), which holds $%s\n", sock, m[1])
	case errors.Is(err, gateway.ErrServiceDown):
		fmt.Fprintf(out, "  door        the service at %s, which does not answer: calls are refused until `purser gateway --socket %s` runs\n", sock, sock)
	default:
		fmt.Fprintf(out, "  door        the service at %s (purser gateway), which does not hold $%s: %v\n", sock, m[1], err)
	}
}
