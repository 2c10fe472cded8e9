package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// The wrap-up turn (WireGrant.WrapUp): the request the engine picks is
// forwarded with no tools, so the model can only answer in words, and the
// instruction as its last user message; the reply goes to the agent as
// the reply to its request, and its text to WrapUpDone for STATUS.md.

// maxWrapUpText bounds the reply text the door collects.
const maxWrapUpText = 16 << 10

// maxWrapUpRaw bounds a reply's undelimited bytes the door holds to read
// its text: a non-streamed body, or one event's line.
const maxWrapUpRaw = 1 << 20

// toolFields are the top-level fields, per protocol, that offer the model
// tools or steer its use of them.
var toolFields = map[string][]string{
	"anthropic": {"tools", "tool_choice"},
	"chat":      {"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"},
	"responses": {"tools", "tool_choice", "parallel_tool_calls"},
	"gemini":    {"tools", "toolConfig", "tool_config"},
}

// applyWrapUp turns a request into the wrap-up turn: its tools removed
// and text appended as the last user message. A body of a shape it does
// not know is returned unchanged, with an error.
func applyWrapUp(api string, body []byte, text string) ([]byte, error) {
	fields, ok := toolFields[api]
	if !ok {
		return body, fmt.Errorf("no wrap-up for protocol %q", api)
	}
	out := body
	var err error
	for _, f := range fields {
		if out, err = delField(out, f); err != nil {
			return body, err
		}
	}
	switch api {
	case "anthropic":
		out, err = anthropicWrapUp(out, text)
	case "chat":
		out, err = appendMessage(out, "messages", `{"role":"user","content":`+strconv.Quote(text)+`}`)
	case "responses":
		in := getField(out, "input")
		switch {
		case bytes.HasPrefix(in, []byte(`"`)):
			out, err = setField(out, "input", string(appendToString(in, "\n\n"+text)))
		case bytes.HasPrefix(in, []byte(`[`)):
			item := `{"role":"user","content":[{"type":"input_text","text":` + strconv.Quote(text) + `}]}`
			out, err = setField(out, "input", string(appendToArray(in, item)))
		case in == nil:
			out, err = setField(out, "input", strconv.Quote(text))
		default:
			err = errors.New("input is neither a string nor a list")
		}
	case "gemini":
		out, err = appendMessage(out, "contents", `{"role":"user","parts":[{"text":`+strconv.Quote(text)+`}]}`)
	}
	if err != nil {
		return body, err
	}
	return out, nil
}

// appendMessage adds a raw element at the end of a top-level array field.
func appendMessage(body []byte, field, el string) ([]byte, error) {
	arr := getField(body, field)
	if !bytes.HasPrefix(arr, []byte(`[`)) {
		return nil, errors.New("no " + field)
	}
	return setField(body, field, string(appendToArray(arr, el)))
}

// anthropicWrapUp appends the instruction to an Anthropic conversation.
// Anthropic refuses tool_use and tool_result blocks in a request that
// defines no tools, so each is turned into a text block saying the same:
// the model still reads what its tools did, and the request stays valid.
func anthropicWrapUp(body []byte, text string) ([]byte, error) {
	raw := getField(body, "messages")
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return nil, errors.New("no messages")
	}
	for _, m := range msgs {
		var blocks []json.RawMessage
		if c := m["content"]; !bytes.HasPrefix(bytes.TrimSpace(c), []byte(`[`)) || json.Unmarshal(c, &blocks) != nil {
			continue
		}
		again := false
		for i, b := range blocks {
			if t, ok := toolAsText(b); ok {
				blocks[i], again = t, true
			}
		}
		if again {
			c, err := json.Marshal(blocks)
			if err != nil {
				return nil, err
			}
			m["content"] = c
		}
	}
	last := msgs[len(msgs)-1]
	var role string
	_ = json.Unmarshal(last["role"], &role)
	block := json.RawMessage(`{"type":"text","text":` + strconv.Quote(text) + `}`)
	if role == "user" {
		c := last["content"]
		var s string
		var blocks []json.RawMessage
		switch {
		case json.Unmarshal(c, &s) == nil:
			if strings.TrimSpace(s) != "" {
				blocks = append(blocks, json.RawMessage(`{"type":"text","text":`+strconv.Quote(s)+`}`))
			}
			blocks = append(blocks, block)
		case json.Unmarshal(c, &blocks) == nil:
			blocks = append(blocks, block)
		default:
			return nil, errors.New("the last message has no content")
		}
		nc, err := json.Marshal(blocks)
		if err != nil {
			return nil, err
		}
		last["content"] = nc
	} else {
		msgs = append(msgs, map[string]json.RawMessage{"role": json.RawMessage(`"user"`), "content": json.RawMessage(`[` + string(block) + `]`)})
	}
	out, err := json.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	return setField(body, "messages", string(out))
}

// toolAsText is a tool_use or tool_result block (or a server tool's) as a
// text block, and whether b was one.
func toolAsText(b json.RawMessage) (json.RawMessage, bool) {
	var v struct {
		Type    string          `json:"type"`
		Name    string          `json:"name"`
		Input   json.RawMessage `json:"input"`
		Content json.RawMessage `json:"content"`
		IsError bool            `json:"is_error"`
	}
	if json.Unmarshal(b, &v) != nil {
		return nil, false
	}
	var s string
	switch {
	case strings.HasSuffix(v.Type, "tool_use"):
		s = "[called tool " + v.Name + " with " + string(firstRaw(v.Input, "{}")) + "]"
	case strings.HasSuffix(v.Type, "tool_result"):
		head := "[tool result]"
		if v.IsError {
			head = "[tool error]"
		}
		s = head + "\n" + resultText(v.Content)
	default:
		return nil, false
	}
	return json.RawMessage(`{"type":"text","text":` + strconv.Quote(s) + `}`), true
}

// resultText is a tool result's content as text: a string as it is, a
// list's text blocks joined, anything else as its JSON.
func resultText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			} else {
				parts = append(parts, "["+b.Type+"]")
			}
		}
		return strings.Join(parts, "\n")
	}
	return string(c)
}

func firstRaw(r json.RawMessage, def string) json.RawMessage {
	if len(bytes.TrimSpace(r)) == 0 {
		return json.RawMessage(def)
	}
	return r
}

// delField removes a top-level field of a JSON object, keeping every
// other member's bytes and order.
func delField(obj []byte, key string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errors.New("the request body is not a JSON object")
	}
	open := int(dec.InputOffset())
	var keep []span
	found := false
	for dec.More() {
		start := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the request body is not valid JSON: %w", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("the request body is not valid JSON: %w", err)
		}
		end := int(dec.InputOffset())
		for start < end && (isSpace(obj[start]) || obj[start] == ',') {
			start++
		}
		if k, _ := tok.(string); k == key {
			found = true
			continue
		}
		keep = append(keep, span{start, end})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("the request body is not valid JSON: %w", err)
	}
	if !found {
		return obj, nil
	}
	closing := int(dec.InputOffset()) - 1
	out := append([]byte{}, obj[:open]...)
	for i, sp := range keep {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, obj[sp.start:sp.end]...)
	}
	return append(out, obj[closing:]...), nil
}

// wrapUpReader collects the text of a wrap-up reply as it passes, and
// hands it on once, when the reply ends.
type wrapUpReader struct {
	api  string
	sse  bool
	raw  []byte          // a JSON body, or the current SSE line
	over bool            // raw outgrew maxWrapUpRaw
	text strings.Builder // what the reply said, up to maxWrapUpText
}

// Write takes the reply's next bytes.
func (c *wrapUpReader) Write(p []byte) (int, error) {
	n := len(p)
	if !c.sse {
		c.hold(p)
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.hold(p)
			break
		}
		c.hold(p[:i])
		c.line()
		p = p[i+1:]
	}
	return n, nil
}

func (c *wrapUpReader) hold(p []byte) {
	if c.over || len(c.raw)+len(p) > maxWrapUpRaw {
		c.over, c.raw = true, nil
		return
	}
	c.raw = append(c.raw, p...)
}

// line reads one complete SSE line.
func (c *wrapUpReader) line() {
	l, over := bytes.TrimRight(c.raw, "\r"), c.over
	c.raw, c.over = c.raw[:0], false
	if over {
		return
	}
	data, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok {
		return
	}
	c.event(bytes.TrimSpace(data))
}

// event reads one SSE event's data.
func (c *wrapUpReader) event(data []byte) {
	switch c.api {
	case "anthropic":
		var v struct {
			Type  string `json:"type"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		if json.Unmarshal(data, &v) == nil && v.Type == "content_block_delta" && v.Delta.Type == "text_delta" {
			c.add(v.Delta.Text)
		}
	case "chat":
		var v struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &v) == nil {
			for _, ch := range v.Choices {
				c.add(ch.Delta.Content)
			}
		}
	case "responses":
		var v struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if json.Unmarshal(data, &v) == nil && v.Type == "response.output_text.delta" {
			c.add(v.Delta)
		}
	case "gemini":
		c.gemini(data)
	}
}

// gemini reads a Gemini response object's text (not its thoughts).
func (c *wrapUpReader) gemini(data []byte) {
	var v struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text    string `json:"text"`
					Thought bool   `json:"thought"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if json.Unmarshal(data, &v) != nil {
		return
	}
	for _, cand := range v.Candidates {
		for _, p := range cand.Content.Parts {
			if !p.Thought {
				c.add(p.Text)
			}
		}
	}
}

// add keeps s, up to maxWrapUpText in all.
func (c *wrapUpReader) add(s string) {
	if left := maxWrapUpText - c.text.Len(); left > 0 {
		if len(s) > left {
			s = strings.ToValidUTF8(s[:left], "")
		}
		c.text.WriteString(s)
	}
}

// end is the reply's text, once it has ended whole.
func (c *wrapUpReader) end() string {
	if c.sse {
		if len(c.raw) > 0 {
			c.line()
		}
		return c.text.String()
	}
	if c.over {
		return ""
	}
	body := bytes.TrimSpace(c.raw)
	switch c.api {
	case "anthropic":
		var v struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(body, &v) == nil {
			for _, b := range v.Content {
				if b.Type == "text" {
					c.add(b.Text)
				}
			}
		}
	case "chat":
		var v struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(body, &v) == nil {
			for _, ch := range v.Choices {
				c.add(ch.Message.Content)
			}
		}
	case "responses":
		var v struct {
			Output []struct {
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		if json.Unmarshal(body, &v) == nil {
			for _, o := range v.Output {
				for _, b := range o.Content {
					if b.Type == "output_text" {
						c.add(b.Text)
					}
				}
			}
		}
	case "gemini":
		// streamGenerateContent without alt=sse answers a JSON list of
		// the objects it would have streamed.
		var list []json.RawMessage
		if json.Unmarshal(body, &list) == nil {
			for _, o := range list {
				c.gemini(o)
			}
		} else {
			c.gemini(body)
		}
	}
	return c.text.String()
}

// onceText makes a WrapUpDone safe to call from every way a request can
// end, and nil-safe: the first call is the one passed on.
func onceText(f func(string)) func(string) {
	if f == nil {
		return nil
	}
	var o sync.Once
	return func(s string) { o.Do(func() { f(s) }) }
}
