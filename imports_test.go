package purser_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The dependency arrow points one way: the domain, the budget core and the
// engine know interfaces, never a concrete backend or store, and the budget
// core does no I/O.
func TestDependencyArrow(t *testing.T) {
	forbidden := map[string][]string{
		"github.com/purser-dev/purser":           {"/sqlite", "/backend/", "/engine", "/config", "os/exec", "database/sql"},
		"github.com/purser-dev/purser/budget":    {"github.com/", "os", "io", "net", "database/sql", "log"},
		"github.com/purser-dev/purser/engine":    {"/sqlite", "/backend/", "/config", "/validate", "/report", "database/sql", "os/exec"},
		"github.com/purser-dev/purser/pricing":   {"/sqlite", "/backend/", "/engine"},
		"github.com/purser-dev/purser/tui":       {"/sqlite", "/backend/", "/engine", "/config"},
		"github.com/purser-dev/purser/dashboard": {"/sqlite", "/postgres", "/backend/", "/engine", "/config"},
		"github.com/purser-dev/purser/alert":     {"/sqlite", "/postgres", "/backend/", "/engine", "/config", "/tui"},
		"github.com/purser-dev/purser/storetest": {"/sqlite", "/postgres", "/backend/", "/engine"},
		// The forecast is arithmetic over histories: no I/O, no store.
		"github.com/purser-dev/purser/forecast": {"/sqlite", "/postgres", "/engine", "/backend/", "/config", "/app", "/replay", "os", "io", "net", "database/sql"},
		// Purser's door speaks the wire and asks the engine through
		// purser.WireAdmitter: it knows no engine, store or config.
		"github.com/purser-dev/purser/gateway": {"/engine", "/sqlite", "/postgres", "/config", "/app", "database/sql"},
		// config reads files into domain types; the packages that deliver
		// (alerts, the dashboard, the TUI) consume those types, never the
		// other way round.
		"github.com/purser-dev/purser/config": {"/alert", "/dashboard", "/tui"},
		// A store keeps records; it links no tokenizer. What an agent may
		// not write is the workspace's Guard, which the wiring fills.
		"github.com/purser-dev/purser/sqlite":   {"/contextbuild"},
		"github.com/purser-dev/purser/postgres": {"/contextbuild"},
		// Confinement and safe writes know nothing of who asks.
		"github.com/purser-dev/purser/workspace": {"/sqlite", "/postgres", "/storetest", "/backend", "/engine", "/contextbuild", "/config"},
		// Only app opens a store: the commands and the worker go through it.
		"github.com/purser-dev/purser/cmd/purser": {"/sqlite", "/postgres"},
		"github.com/purser-dev/purser/worker":     {"/sqlite", "/postgres", "/config"},
	}
	// Backend drivers decode their options through package backend, never
	// the config loader (and the YAML loader and alerts it links).
	drivers, err := exec.Command("go", "list", "github.com/purser-dev/purser/backend/...").Output()
	if err != nil {
		t.Fatalf("go list backend/...: %v", err)
	}
	for _, pkg := range strings.Fields(string(drivers)) {
		forbidden[pkg] = append(forbidden[pkg], "/config")
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			for _, b := range bad {
				if imp == b || strings.Contains(imp, "purser"+b) || (strings.HasPrefix(b, "github.com/") && strings.HasPrefix(imp, b)) ||
					(!strings.Contains(b, "/") && (imp == b || strings.HasPrefix(imp, b+"/"))) {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
}
