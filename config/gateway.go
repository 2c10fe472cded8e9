package config

import "path/filepath"

// gatewayFile is purser.yaml's gateway: section: the door's shared service
// (`purser gateway`) this project's workers and runs open their lanes on.
type gatewayFile struct {
	// Socket is the service's control socket (a path; relative to
	// purser.yaml's folder).
	Socket string `yaml:"socket"`
}

// gateway reads the gateway: key: the socket, made absolute.
func (p *Project) gateway(g *gatewayFile) error {
	if g == nil {
		return nil
	}
	if g.Socket == "" {
		return p.doc.at("gateway.socket", "the door's service socket must be a path (or leave gateway: out for in-process lanes)", nil)
	}
	s := g.Socket
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.Dir, s)
	}
	p.GatewaySocket = filepath.Clean(s)
	return nil
}
