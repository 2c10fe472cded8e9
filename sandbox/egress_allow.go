package sandbox

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// An allow entry is `host:port`: a DNS name, an IPv4 address or a bracketed
// IPv6 address, and a TCP port. `*.suffix:port` allows every name below
// suffix (not suffix itself: list both when both are wanted), for the
// registries that spread downloads over subdomains. No other wildcard, no
// port range, no scheme: the entry names exactly what the box may reach.

// allowEntry is one parsed entry.
type allowEntry struct {
	host     string // lower case, no trailing dot; for a wildcard, the suffix with its leading dot (".npmjs.org")
	port     string
	wildcard bool
	ip       bool // host is an IP address literal
}

// String gives the entry back in its canonical form.
func (e allowEntry) String() string {
	if e.wildcard {
		return "*" + e.host + ":" + e.port
	}
	return net.JoinHostPort(e.host, e.port)
}

// maxHostLen is the longest DNS name.
const maxHostLen = 253

// parseAllowEntry reads one entry of sandbox.network.allow, saying what is
// wrong with it.
func parseAllowEntry(s string) (allowEntry, error) {
	if strings.Contains(s, "/") {
		return allowEntry{}, fmt.Errorf("%q is not host:port (like registry.npmjs.org:443): no scheme, no path", s)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return allowEntry{}, fmt.Errorf("%q is not host:port (like registry.npmjs.org:443)", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return allowEntry{}, fmt.Errorf("%q: the port %q is not a TCP port (1 to 65535)", s, port)
	}
	e := allowEntry{port: port}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return allowEntry{}, fmt.Errorf("%q: an IPv6 zone is not allowed", s)
		}
		if a.Is6() && !strings.HasPrefix(s, "[") {
			return allowEntry{}, fmt.Errorf("%q: write an IPv6 address in brackets, [%s]:%s", s, host, port)
		}
		e.host, e.ip = a.Unmap().String(), true
		return e, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		e.wildcard, name = true, rest
		if !strings.Contains(name, ".") {
			return allowEntry{}, fmt.Errorf("%q: a wildcard needs a suffix of at least two labels (*.example.org:443), not a whole top-level domain", s)
		}
	}
	if !validHostName(name) {
		return allowEntry{}, fmt.Errorf("%q: %q is not a host name or IP address (only *.suffix:port is a wildcard)", s, host)
	}
	e.host = name
	if e.wildcard {
		e.host = "." + name
	}
	return e, nil
}

// validHostName reports whether s is a DNS name: dot-separated labels of
// letters, digits and hyphens (underscores tolerated, as some registries'
// names have them), none empty, none starting or ending with a hyphen.
func validHostName(s string) bool {
	if s == "" || len(s) > maxHostLen {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// allowList is a box's parsed allow-list.
type allowList []allowEntry

// parseAllowList parses entries, refusing the first bad one by name.
func parseAllowList(entries []string) (allowList, error) {
	l := make(allowList, 0, len(entries))
	for _, s := range entries {
		e, err := parseAllowEntry(s)
		if err != nil {
			return nil, err
		}
		l = append(l, e)
	}
	return l, nil
}

// match reports the entry that lets host:port through (host as normalised
// by destination), if any.
func (l allowList) match(host, port string) (allowEntry, bool) {
	for _, e := range l {
		if e.port != port {
			continue
		}
		if e.wildcard && strings.HasSuffix(host, e.host) && len(host) > len(e.host) {
			return e, true
		}
		if !e.wildcard && e.host == host {
			return e, true
		}
	}
	return allowEntry{}, false
}

// destination normalises a destination a client asked for (host:port, as
// in a CONNECT line or an absolute URL with its default port added), or
// says why it is none.
func destination(hostport string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(hostport)
	if err != nil {
		return "", "", fmt.Errorf("%q is not host:port", hostport)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("%q: not a TCP port", hostport)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return "", "", fmt.Errorf("%q: an IPv6 zone", hostport)
		}
		return a.Unmap().String(), port, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if !validHostName(host) {
		return "", "", fmt.Errorf("%q is not a host name", hostport)
	}
	return host, port, nil
}

// reachable reports whether a name's address may be dialled: a name never
// leads to a loopback, private, link-local, shared (CGNAT), unspecified or
// multicast address — Purser's own listeners and its door lanes live on
// loopback, and a name the agent controls (or a DNS answer) must not point
// the proxy at them. An address the user listed literally is dialled as
// listed (see egress.dial).
func reachable(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() && !a.IsPrivate() && !cgnat.Contains(a)
}

// cgnat is RFC 6598's shared address space, which IsPrivate leaves out.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")
