package proc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser/gateway"
)

// Keys held at the door (issues 20 and 21): the call's lane of the door
// holds the real provider key, read outside the CLI from Purser's
// environment (the options' env: over it), a key file or a declared login;
// the CLI, boxed or not, gets only the lane's scoped token, under the very
// name it reads its key from, and the door swaps it for the real key on
// each request in the protocol's own place. The token dies with the lane,
// when the call ends. Where the door cannot stand in front of the CLI (the
// meter off; Bedrock, Vertex; Codex's built-in providers) a key would have
// to go to the CLI itself: unboxed it keeps its own, said in the call's
// note and by purser check; boxed the call is refused rather than the key
// put in the box.

// Credentials are the names an agent CLI reads its provider key from.
type Credentials struct {
	// Names are the variables the CLI reads its key from, in its own order
	// of precedence: the first one set is the key the door holds, and the
	// CLI gets the lane's token under that name.
	Names []string
	// Bearer are those of Names whose value the CLI sends as
	// Authorization: Bearer where its protocol's own header is another
	// (Anthropic's OAuth tokens): the door sends the real one there too.
	Bearer []string
	// Also are more names of provider keys, which never reach the CLI once
	// the door holds its key (OPENAI_API_KEY beside a Codex provider's
	// env_key).
	Also []string
	// Login is a login file the backend declares (Claude Code's
	// ~/.claude/.credentials.json, for login: claude), read before any
	// name; the zero Key for none.
	Login gateway.Key
	// LoginName is the variable the CLI gets the token of a Login under.
	LoginName string
}

// all is every name of a provider key the CLI might read.
func (c Credentials) all() []string {
	out := slices.Concat(c.Names, c.Also)
	if c.LoginName != "" {
		out = append(out, c.LoginName)
	}
	return out
}

// DoorKey is the key the door holds for a call: where it is read (Key, by
// name only), and the variable the CLI gets the lane's token under. The
// zero DoorKey holds none.
type DoorKey struct {
	Key  gateway.Key
	Name string
}

// Held reports whether the door holds a key.
func (d DoorKey) Held() bool { return d.Key.Held() }

// DoorKey picks the key the door holds for the CLI: the declared login,
// else the options' keyFile (under the first of Names), else the first of
// Names set in the CLI's environment. The zero DoorKey when none is.
func (o CLIOptions) DoorKey(c Credentials) DoorKey {
	switch {
	case c.Login.Held():
		return DoorKey{Key: c.Login, Name: c.LoginName}
	case o.KeyFile != "" && len(c.Names) > 0:
		return DoorKey{Key: gateway.Key{File: o.KeyFile, Bearer: slices.Contains(c.Bearer, c.Names[0])}, Name: c.Names[0]}
	}
	for _, n := range c.Names {
		if strings.TrimSpace(o.Getenv(n)) != "" {
			return DoorKey{Key: gateway.Key{Env: n, Bearer: slices.Contains(c.Bearer, n)}, Name: n}
		}
	}
	return serviceKey(c)
}

// serviceKey is, where the door's service (purser gateway) holds the
// keys, the first of c's names it holds (asked by name, the value never
// leaves it): a worker needs no provider key of its own. The zero DoorKey
// without a service, or when it holds none of them (the CLI's own
// credentials then pass, as without a key).
func serviceKey(c Credentials) DoorKey {
	sock := gateway.ServiceSocket()
	if sock == "" {
		return DoorKey{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.Names {
		k := gateway.Key{Env: n, Bearer: slices.Contains(c.Bearer, n)}
		if gateway.ServiceHasKey(ctx, sock, k) == nil {
			return DoorKey{Key: k, Name: n}
		}
	}
	return DoorKey{}
}

// withToken is env with every provider key of c removed, and the lane's
// token under the name the door's key is the CLI's. A lane without a
// token leaves env as it is (the CLI's own credentials).
func withToken(env []string, c Credentials, name, token string) []string {
	if token == "" {
		return env
	}
	drop := c.all()
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, k) {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+token)
}

// ErrKeyWouldEnterBox is the refusal of a boxed call whose CLI would have
// to hold its own provider key, the door being unable to stand in front of
// it.
var ErrKeyWouldEnterBox = errors.New("the CLI's provider key would enter the box")

// refuseKeyInBox refuses a boxed call not metered at the door (why) whose
// CLI would get a provider key of c from Purser's environment: the key is
// not put in the box.
func (o CLIOptions) refuseKeyInBox(c Credentials, why string) error {
	if !o.Boxed() {
		return nil
	}
	var set []string
	for _, n := range c.all() {
		if strings.TrimSpace(o.Getenv(n)) != "" {
			set = append(set, "$"+n)
		}
	}
	if len(set) == 0 && !c.Login.Held() && o.KeyFile == "" {
		return nil
	}
	if why == "" {
		why = "the call is not metered"
	}
	return fmt.Errorf("%w: Purser's door cannot stand in front of it (%s), so it would need %s itself; "+
		"give it a provider the door can front (a base URL), or run it unboxed (sandbox: off) knowingly",
		ErrKeyWouldEnterBox, why, firstOf(strings.Join(set, ", "), "its key"))
}

// KeyLine says, for purser check and the call's note, which key the door
// holds for the CLI, by name only, never its value; upstream is "" when
// the door cannot stand in front of it (why).
func (o CLIOptions) KeyLine(c Credentials, upstream, why string) string {
	metered := upstream != "" && (o.WireMeter == nil || *o.WireMeter)
	if !metered {
		if o.WireMeter != nil && !*o.WireMeter {
			why = "wireMeter: false"
		}
		if o.Boxed() && o.refuseKeyInBox(c, why) != nil {
			return "none: the door cannot stand in front of the CLI (" + why + "); a boxed call is refused rather than its key put in the box"
		}
		if o.Boxed() {
			return "none: the door cannot stand in front of the CLI (" + why + "); in the box it has no key and no way out"
		}
		return "none at the door (" + why + "): the CLI holds its own key"
	}
	d := o.DoorKey(c)
	if !d.Held() {
		names := make([]string, len(c.Names))
		for i, n := range c.Names {
			names[i] = "$" + n
		}
		if o.Boxed() {
			return "none: no " + strings.Join(names, ", ") + " is set; in the box the CLI has no credentials"
		}
		return "none: no " + strings.Join(names, ", ") + " is set; the CLI's own login passes through the door"
	}
	return d.Key.Name() + ", held at the door; the CLI gets a scoped token as $" + d.Name + ", which dies with the call"
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// BoxEnvNames are the names that enter the CLI's box, for purser check:
// the options' env:, the CLI's needs but its provider keys, and the name
// the lane's token goes under (a scoped token, not the key).
func (o CLIOptions) BoxEnvNames(needs []string, c Credentials) []string {
	keys := c.all()
	out := o.EnvNames()
	for _, n := range needs {
		if !slices.Contains(keys, n) {
			out = append(out, n)
		}
	}
	if d := o.DoorKey(c); d.Held() {
		out = append(out, d.Name+" (the door's scoped token)")
	}
	return out
}
