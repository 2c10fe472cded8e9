package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/config"
)

// Input on which the YAML library panics (found by FuzzLoadScript: a custom
// tag on a sequence) is bad input named by its file, never a crash.
func TestYAMLTheDecoderChokesOnIsAnErrorNamingTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sim.yaml")
	if err := os.WriteFile(p, []byte("steps:\n !0000000 00"), 0o644); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Steps []struct{} `yaml:"steps"`
	}
	err := config.DecodeFile(p, &v)
	if err == nil || !strings.Contains(err.Error(), "sim.yaml") {
		t.Fatalf("DecodeFile = %v, want an error naming sim.yaml", err)
	}
}
