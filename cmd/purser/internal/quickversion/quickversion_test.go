package quickversion_test

import (
	"runtime/debug"
	"testing"

	"github.com/purser-dev/purser/cmd/purser/internal/quickversion"
)

// ReadBuild reads the same module version, revision and Go version as
// runtime/debug does, without importing it (quickversion must initialise
// before runtime/debug would let it).
func TestReadBuildAgreesWithRuntimeDebug(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	b, ok2 := quickversion.ReadBuild()
	if ok != ok2 {
		t.Fatalf("ReadBuild ok = %v, runtime/debug ok = %v", ok2, ok)
	}
	if !ok {
		t.Skip("built without module information")
	}
	want := quickversion.Build{Version: info.Main.Version, GoVersion: info.GoVersion}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			want.Revision = s.Value
		case "vcs.modified":
			want.Modified = s.Value == "true"
		}
	}
	if b != want {
		t.Fatalf("ReadBuild = %+v, runtime/debug says %+v", b, want)
	}
}
