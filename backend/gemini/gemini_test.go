package gemini_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/purser-dev/purser/backend/gemini"
	"github.com/purser-dev/purser/backend/internal/fixturetest"
	"github.com/purser-dev/purser/budget"
)

func feed(t *testing.T, p *gemini.Parser, name string) budget.Totals {
	t.Helper()
	return fixturetest.Feed(t, name, p.Feed)
}

// Every token of the real captured runs lands once, the router call's
// included; the models are not in the catalogue, so dollars are unknown.
func TestParserGoldenFixtures(t *testing.T) {
	tests := []struct {
		fixture string
		tokens  int64 // total_tokens of the result, thoughts included
		failed  bool
	}{
		// router (50 + 3) + tool call (5200 + 60 + 20 thoughts) + done (5800 + 5)
		{"tool.yolo-shell.stream-json.stdout.jsonl", 11138, false},
		{"text.stream-json.stdout.jsonl", 5858, false},
		{"err.500x2-then-ok.stream-json.stdout.jsonl", 5858, false},
		// 500 on every agent request: only the router's 53 tokens were used.
		{"err.500-always.stream-json.stdout.jsonl", 53, true},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			p := gemini.NewParser()
			tot := feed(t, p, tt.fixture)
			_, done, failed, _ := p.State()
			if tot.Tokens != tt.tokens || !done || (failed != "") != tt.failed {
				t.Fatalf("%d tokens (want %d), done %v, failed %q", tot.Tokens, tt.tokens, done, failed)
			}
			if tot.USDSource() != budget.SourceUnknown {
				t.Fatalf("usd source %s: gemini-3.x models have no built-in price, so it must be unknown", tot.USDSource())
			}
		})
	}
}

// A killed run prints no result; the chat file keeps each message's tokens
// (a message id may appear twice), and they are counted once.
func TestChatFileRecoversKilledRun(t *testing.T) {
	p := gemini.NewParser()
	if tot := feed(t, p, "sigterm.after-tool-turn.no-relaunch.stream-json.stdout.jsonl"); tot.Tokens != 0 {
		t.Fatalf("a killed run printed usage")
	}
	chat, err := os.ReadFile("testdata/sigterm.after-tool-turn.no-relaunch.chat-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var tot budget.Totals
	for _, ev := range p.Recover(chat) {
		tot.Add(ev)
	}
	if tot.Tokens != 5280 {
		t.Fatalf("recovered %d tokens, want 5280 (5200 in, 60 out, 20 thoughts)", tot.Tokens)
	}
	if again := p.Recover(chat); len(again) != 0 {
		t.Fatal("recovered twice")
	}
}

func FuzzParser(f *testing.F) {
	data, _ := os.ReadFile("testdata/tool.yolo-shell.stream-json.stdout.jsonl")
	for _, l := range bytes.Split(data, []byte("\n")) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		p := gemini.NewParser()
		evs, _ := p.Feed(line)
		evs = append(evs, p.Recover(line)...)
		for _, ev := range evs {
			if err := ev.Validate(); err != nil {
				t.Fatalf("invalid event from %q: %v", line, err)
			}
		}
	})
}

// The chat file's messages arrive while Gemini runs, then the result gives
// each model's totals: every token lands once.
func TestChatThenResultCountsOnce(t *testing.T) {
	chat, err := os.ReadFile("testdata/sigterm.after-tool-turn.no-relaunch.chat-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	p := gemini.NewParser()
	var tot budget.Totals
	for _, ev := range p.Recover(chat) { // the tool-call message: 5,280 tokens of gemini-3.8-flash
		tot.Add(ev)
	}
	res := feed(t, p, "tool.yolo-shell.stream-json.stdout.jsonl") // its result: 11,138 in all
	if tot.Tokens != 5280 || tot.Tokens+res.Tokens != 11138 {
		t.Fatalf("chat %d + result %d tokens, want 5280 + 5858 = 11138", tot.Tokens, res.Tokens)
	}
}

// Gemini writes its last chat message after the result: the result's
// totals are the authority, and the late message adds nothing.
func TestResultThenLateChatCountsOnce(t *testing.T) {
	p := gemini.NewParser()
	res := feed(t, p, "tool.yolo-shell.stream-json.stdout.jsonl")
	late := []byte(`{"id": "late-1", "type": "gemini", "model": "gemini-3.8-flash", "tokens": {"input": 5800, "output": 5, "cached": 4500, "thoughts": 0, "total": 5805}}`)
	if evs := p.FeedChat(late); len(evs) != 0 || res.Tokens != 11138 {
		t.Fatalf("result %d tokens, then the late chat message added %+v", res.Tokens, evs)
	}
}
