package gateway

import (
	"io"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/meter"
)

// The watcher reads spawns out of a stream however its bytes are split:
// here one byte at a time, an Agent call and a Task call (Claude Code
// before 2.1) recorded, a Bash call and an Agent call whose input is not
// JSON ignored, an Agent call with no prompt ignored.
func TestSpawnWatcherReadsAStreamByteByByte(t *testing.T) {
	events := []string{
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","name":"Agent","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"prompt\":\"P1\","}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"description\":\"one\"}"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"b","name":"Bash","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"prompt\":\"NO\"}"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"c","name":"Agent","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"prompt\":"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"d","name":"Task","input":{}}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"prompt\":\"P2\",\"subagent_type\":\"Explore\",\"description\":\"two\"}"}}`,
		`{"type":"content_block_stop","index":3}`,
		`{"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"e","name":"Agent","input":{}}}`,
		`{"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":"{\"description\":\"no prompt\"}"}}`,
		`{"type":"content_block_stop","index":4}`,
	}
	var stream strings.Builder
	for _, e := range events {
		stream.WriteString("event: x\r\ndata: " + e + "\r\n\r\n")
	}
	var s subAgents
	r := s.watch(meter.APIAnthropic, true, io.NopCloser(&oneByte{s: stream.String()}))
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	if len(s.spawns) != 2 || s.spawns[0].prompt != "P1" || s.spawns[0].name != "general-purpose: one" ||
		s.spawns[1].prompt != "P2" || s.spawns[1].name != "Explore: two" {
		t.Fatalf("spawns %+v", s.spawns)
	}
}

// oneByte reads its string one byte at a time.
type oneByte struct{ s string }

func (o *oneByte) Read(p []byte) (int, error) {
	if o.s == "" {
		return 0, io.EOF
	}
	p[0], o.s = o.s[0], o.s[1:]
	return 1, nil
}
