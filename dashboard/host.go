package dashboard

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// hosts is what the dashboard answers to, read from the address it listens
// on. A browser sends the name it looked up in Host: a page on another site
// that points its own name at this machine (DNS rebinding) sends that name,
// which is refused, so it never reads the snapshot. IP literals cannot be
// rebound, nor can localhost and its subdomains (RFC 6761), so those are
// what a loopback listener answers to; one on a given address answers to
// that address too, and one on every address to any IP literal, to this
// machine's host name and to the names given.
type hosts struct {
	anyIP bool
	ips   []net.IP
	names map[string]bool
}

func newHosts(addr string, extra []string) hosts {
	h := hosts{names: map[string]bool{}}
	for _, n := range extra {
		h.names[canonicalHost(n)] = true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil || addr == "" {
		// Not said where it listens: any IP literal, which no page can
		// rebind, and localhost; names only as given.
		h.anyIP = true
		return h
	}
	switch ip := net.ParseIP(host); {
	case host == "" || ip != nil && ip.IsUnspecified():
		h.anyIP = true
		if name, err := os.Hostname(); err == nil && name != "" {
			h.names[canonicalHost(name)] = true
			short, _, _ := strings.Cut(name, ".")
			h.names[canonicalHost(short)] = true
		}
	case ip != nil:
		h.ips = append(h.ips, ip)
	default:
		h.names[canonicalHost(host)] = true
	}
	return h
}

// canonicalHost is a Host header's name: no port, no brackets, lower case,
// no trailing dot.
func canonicalHost(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// allows says whether a request's Host is one the dashboard answers to.
func (h hosts) allows(hostHeader string) bool {
	host := canonicalHost(hostHeader)
	if host == "" { // HTTP/1.0 without Host: no browser sends that
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || h.names[host] {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || h.anyIP {
		return true
	}
	for _, want := range h.ips {
		if want.Equal(ip) {
			return true
		}
	}
	return false
}

// refuseHost answers a request for another host: 421, and why.
func refuseHost(w http.ResponseWriter, host string) {
	http.Error(w, fmt.Sprintf("misdirected request: %q is not an address this dashboard answers to (localhost, a loopback "+
		"address or the address it listens on). A web page that points its own name at this machine (DNS rebinding) is refused "+
		"here; open the dashboard by the address purser serve printed.", host), http.StatusMisdirectedRequest)
}
