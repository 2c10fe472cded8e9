package proc_test

import (
	"errors"

	"context"
	"github.com/purser-dev/purser"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/gateway"
)

// A process whose lanes open on the door's service holds no provider key:
// the door's key is the first of the CLI's names the service holds, asked
// by name; without a service, or when it holds none, there is none (the
// CLI's own credentials pass, as before).
func TestDoorKeyIsTheServicesWhenAProcessHoldsNone(t *testing.T) {
	s, err := gateway.ListenService(filepath.Join(t.TempDir(), "gw", "gateway.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s.Getenv = func(k string) string {
		if k == "SECOND_KEY" {
			return "sk-held-by-the-service"
		}
		return ""
	}
	done := make(chan struct{})
	go func() { _ = s.Serve(context.Background()); close(done) }()
	defer func() { _ = s.Close(); <-done }()
	creds := proc.Credentials{Names: []string{"FIRST_KEY", "SECOND_KEY"}, Bearer: []string{"SECOND_KEY"}}
	t.Setenv("FIRST_KEY", "")
	t.Setenv("SECOND_KEY", "")
	o := proc.CLIOptions{}

	if k := o.DoorKey(creds); k.Held() {
		t.Fatalf("no service, no key in the environment: the door holds %+v", k)
	}
	gateway.UseService(s.Socket())
	defer gateway.UseService("")
	k := o.DoorKey(creds)
	if !k.Held() || k.Name != "SECOND_KEY" || k.Key.Env != "SECOND_KEY" || !k.Key.Bearer {
		t.Fatalf("with the service holding $SECOND_KEY: %+v, want it, as a bearer key", k)
	}
	none := proc.Credentials{Names: []string{"FIRST_KEY"}}
	if k := o.DoorKey(none); k.Held() {
		t.Fatalf("the service holds none of the names, yet the door holds %+v", k)
	}
}

// Told to use the door's service, a call whose key the door does not hold
// is refused while the service is down: it never runs unmetered.
func TestAServiceDownRefusesTheCallEvenWithoutAKey(t *testing.T) {
	gateway.UseService(filepath.Join(t.TempDir(), "nobody", "gateway.sock"))
	defer gateway.UseService("")
	w, why, err := proc.CLIOptions{}.StartWireMeter(context.Background(), purser.CallHooks{}, "claude", "http://127.0.0.1:9", proc.DoorKey{}, nil)
	if !errors.Is(err, gateway.ErrServiceDown) || w != nil {
		t.Fatalf("meter %v, %q, err %v; want the call refused with ErrServiceDown", w, why, err)
	}
}
