package sandbox

import (
	"strings"
	"testing"
)

// processes: and memoryMiB: bound a box; a bound a box cannot hold, or not
// a whole number, is refused by name.
func TestSettingLimits(t *testing.T) {
	s, probs := ParseSetting(map[string]any{"mode": "on", "processes": uint64(64), "memoryMiB": uint64(512)}, "/")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if l := s.Limits(); l.Processes != 64 || l.MemoryBytes != 512<<20 {
		t.Fatalf("limits %+v", l)
	}
	for _, bad := range []map[string]any{
		{"mode": "on", "processes": uint64(3)},
		{"mode": "on", "processes": 2.5},
		{"mode": "on", "memoryMiB": uint64(1)},
		{"mode": "on", "memoryMiB": "lots"},
	} {
		_, probs := ParseSetting(bad, "/")
		if len(probs) != 1 || (probs[0].Path != "processes" && probs[0].Path != "memoryMiB") || !strings.Contains(probs[0].Msg, "whole number") {
			t.Errorf("%v: problems %v", bad, probs)
		}
	}
}
