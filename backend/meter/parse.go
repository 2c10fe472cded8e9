package meter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
)

// The APIs whose replies the meter reads, told by the request's path.
const (
	apiAnthropic = "anthropic" // POST …/messages
	apiResponses = "responses" // POST …/responses (OpenAI Responses)
	apiChat      = "chat"      // POST …/chat/completions
	apiGemini    = "gemini"    // POST …/models/M:generateContent, :streamGenerateContent
)

var geminiPath = regexp.MustCompile(`/models/([^/:]+):(?:stream)?[gG]enerateContent$`)

type requestModelKey struct{}

// ServeHTTP notes the model a request asks for (the reply's usage is
// journalled under it, as the CLI names it) and passes the request on.
func (m *Meter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		if api, model := apiOf(r.URL.Path); api != "" {
			if model == "" {
				r.Body, model = peekModel(r.Body)
			}
			r = r.WithContext(context.WithValue(r.Context(), requestModelKey{}, model))
		}
	}
	m.proxy.ServeHTTP(w, r)
}

// apiOf tells the API from a request path, and the model where the path
// names it (Gemini).
func apiOf(path string) (api, model string) {
	switch {
	case strings.HasSuffix(path, "/messages"):
		return apiAnthropic, ""
	case strings.HasSuffix(path, "/responses"):
		return apiResponses, ""
	case strings.HasSuffix(path, "/chat/completions"):
		return apiChat, ""
	}
	if s := geminiPath.FindStringSubmatch(path); s != nil {
		return apiGemini, s[1]
	}
	return "", ""
}

// route is the API and requested model of a reply's request.
func route(req *http.Request) (api, model string) {
	api, _ = apiOf(req.URL.Path)
	model, _ = req.Context().Value(requestModelKey{}).(string)
	return api, model
}

// peekModel reads a JSON request body's "model" and returns a body that
// still yields every byte. A body too large to hold is passed on unread.
func peekModel(body io.ReadCloser) (io.ReadCloser, string) {
	if body == nil || body == http.NoBody {
		return body, ""
	}
	head, err := io.ReadAll(io.LimitReader(body, maxRequest+1))
	if err != nil || len(head) > maxRequest {
		return struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), body), body}, ""
	}
	_ = body.Close()
	rest := io.NopCloser(bytes.NewReader(head))
	var v struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(head, &v)
	return rest, v.Model
}

// reader passes a reply's body on to the CLI and reads its usage as it
// goes: an SSE stream event by event, a JSON body whole at its end.
type reader struct {
	body     io.ReadCloser
	rec      func(entry)   // one reply's usage, whole
	carried  *atomic.Int64 // bytes passed on
	api      string
	reqModel string
	sse      bool

	line  []byte // the SSE line being read
	data  []byte // the SSE event's data (or the JSON body) so far
	over  bool   // the line or event is larger than maxEvent: only its ends are held
	head  []byte // an oversized event's first headKeep bytes
	tail  []byte // an oversized event's last tailKeep bytes (a ring kept in order)
	ended bool

	booked    int // usages handed on
	dataLines int // data lines of the event so far
	longLine  int // the line being read is longer than maxEvent: longData or longOther

	// Anthropic: the message being streamed.
	msg      *anthropicUsage
	msgModel string
	recorded bool
	// Gemini: the usage so far of a stream not finished yet (every chunk
	// says it; its first names the prompt the provider bills).
	gemini *geminiUsage
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	if n > 0 {
		r.carried.Add(int64(n))
		r.feed(p[:n])
	}
	if err == io.EOF && !r.ended {
		r.ended = true
		r.end()
	}
	return n, err
}

func (r *reader) Close() error { return r.body.Close() }

func (r *reader) feed(b []byte) {
	if !r.sse {
		r.data = r.keep(r.data, b)
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			r.appendLine(b)
			return
		}
		r.appendLine(b[:i])
		if r.longLine != 0 {
			r.longLine = 0 // the long line went where it belonged as it came
		} else {
			r.sseLine(bytes.TrimSuffix(r.line, []byte{'\r'}))
		}
		r.line = r.line[:0]
		b = b[i+1:]
	}
}

// keep appends b to buf while it stays within maxEvent; past it, the
// event is over and only its head and tail are held from then on.
func (r *reader) keep(buf, b []byte) []byte {
	if !r.over && len(buf)+len(b) <= maxEvent {
		return append(buf, b...)
	}
	if !r.over {
		r.over = true
		r.head = append(r.head[:0], buf[:min(len(buf), headKeep)]...)
		r.head = append(r.head, b[:min(len(b), headKeep-len(r.head))]...)
		r.tail = r.tail[:0]
		r.addTail(buf)
		buf = buf[:0]
	}
	r.addTail(b)
	return buf
}

// addTail keeps the last tailKeep bytes seen of an oversized event.
func (r *reader) addTail(b []byte) {
	if len(b) >= tailKeep {
		r.tail = append(r.tail[:0], b[len(b)-tailKeep:]...)
		return
	}
	if drop := len(r.tail) + len(b) - tailKeep; drop > 0 {
		r.tail = append(r.tail[:0], r.tail[drop:]...)
	}
	r.tail = append(r.tail, b...)
}

// Kinds of line longer than maxEvent, read as they come, never held.
const (
	longData  = 1 // a data line: its bytes go to the event (its head and tail)
	longOther = 2 // a comment or other field: skipped
)

func (r *reader) appendLine(b []byte) {
	switch r.longLine {
	case longData:
		r.data = r.keep(r.data, b)
		return
	case longOther:
		return
	}
	if len(r.line)+len(b) <= maxEvent {
		r.line = append(r.line, b...)
		return
	}
	start := append(r.line[:len(r.line):len(r.line)], b[:min(len(b), 5)]...)
	if !bytes.HasPrefix(start, []byte("data:")) {
		r.longLine = longOther
		return
	}
	r.longLine = longData
	d := bytes.TrimPrefix(bytes.TrimPrefix(append(r.line, b...), []byte("data:")), []byte(" "))
	if r.dataLines > 0 {
		r.data = r.keep(r.data, []byte{'\n'})
	}
	r.dataLines++
	r.data = r.keep(r.data, d)
}

// sseLine reads one line of an event stream: data lines gather, a blank
// line ends the event.
func (r *reader) sseLine(l []byte) {
	switch {
	case len(l) == 0:
		switch {
		case r.over:
			r.oversized()
		case len(r.data) > 0:
			r.event(r.data)
		}
		r.data, r.over, r.head, r.tail, r.dataLines = r.data[:0], false, r.head[:0], r.tail[:0], 0
		r.shrink()
	case bytes.HasPrefix(l, []byte("data:")):
		d := bytes.TrimPrefix(bytes.TrimPrefix(l, []byte("data:")), []byte(" "))
		if r.dataLines > 0 {
			r.data = r.keep(r.data, []byte{'\n'})
		}
		r.dataLines++
		r.data = r.keep(r.data, d)
	}
}

// shrink lets go of a buffer a large event grew, so that a stream holds
// only what its current event needs.
func (r *reader) shrink() {
	if cap(r.data) > 64<<10 {
		r.data = nil
	}
	if cap(r.line) > 64<<10 {
		r.line = nil
	}
}

// oversized reads the usage of an event (or JSON body) larger than
// maxEvent from its ends: the type its head names, the usage its tail ends
// with.
func (r *reader) oversized() {
	raw := lastObject(r.tail, `"usage"`)
	if r.api == apiGemini {
		raw = lastObject(r.tail, `"usageMetadata"`)
	}
	if raw == nil {
		return
	}
	switch r.api {
	case apiAnthropic:
		var u anthropicUsage
		if json.Unmarshal(raw, &u) == nil && (!r.sse || bytes.Contains(r.head, []byte("message_delta"))) {
			r.rec(u.over(r.msg).entry(firstOf(r.msgModel, r.reqModel)))
			r.recorded = true
		}
	case apiResponses:
		var u responsesUsage
		if json.Unmarshal(raw, &u) == nil && (!r.sse || bytes.Contains(r.head, []byte(`"response.completed"`)) ||
			bytes.Contains(r.head, []byte(`"response.incomplete"`)) || bytes.Contains(r.head, []byte(`"response.failed"`))) {
			r.rec(u.entry(r.reqModel))
		}
	case apiChat:
		var u chatUsage
		if json.Unmarshal(raw, &u) == nil {
			r.rec(u.entry(r.reqModel))
		}
	case apiGemini:
		var u geminiUsage
		if json.Unmarshal(raw, &u) == nil && (!r.sse || bytes.Contains(r.tail, []byte(`"finishReason"`))) {
			r.rec(u.entry(r.reqModel))
		}
	}
}

// lastObject is the JSON object that follows the last occurrence of key
// (a quoted field name) in b, or nil.
func lastObject(b []byte, key string) json.RawMessage {
	i := bytes.LastIndex(b, []byte(key))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(b[i+len(key):], " \t\r\n")
	if !bytes.HasPrefix(rest, []byte(":")) {
		return nil
	}
	var raw json.RawMessage
	if json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&raw) != nil || !bytes.HasPrefix(raw, []byte("{")) {
		return nil
	}
	return raw
}

// end is the body's end: a JSON reply is read now. A stream's usage counts
// only with its closing event: a stream delimited by the connection's close
// ends the same way whether the provider finished it or dropped it.
func (r *reader) end() {
	if r.sse {
		if len(r.line) > 0 {
			r.sseLine(r.line)
		}
		r.sseLine(nil)
		return
	}
	switch {
	case r.over:
		r.oversized()
	case len(r.data) > 0:
		r.json(r.data)
	}
}

// event reads one SSE event's data. Most events of a stream are content
// deltas: only one that names usage (or starts a message) is decoded.
func (r *reader) event(data []byte) {
	if !bytes.Contains(data, []byte("sage")) && !bytes.Contains(data, []byte("message_start")) {
		return // neither "usage" nor "usageMetadata"
	}
	switch r.api {
	case apiAnthropic:
		var ev struct {
			Type    string `json:"type"`
			Message *struct {
				Model string          `json:"model"`
				Usage *anthropicUsage `json:"usage"`
			} `json:"message"`
			Usage *anthropicUsage `json:"usage"`
		}
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		switch ev.Type {
		case "message_start":
			r.msg, r.msgModel, r.recorded = nil, "", false
			if ev.Message != nil {
				r.msg, r.msgModel = ev.Message.Usage, ev.Message.Model
			}
		case "message_delta":
			// The delta's usage is cumulative; fields it leaves out keep
			// message_start's figures.
			if ev.Usage == nil || r.recorded {
				return
			}
			u := ev.Usage.over(r.msg)
			r.rec(u.entry(firstOf(r.msgModel, r.reqModel)))
			r.recorded = true
		}
	case apiResponses:
		var ev struct {
			Type     string         `json:"type"`
			Response *responsesBody `json:"response"`
		}
		if json.Unmarshal(data, &ev) != nil || ev.Response == nil || ev.Response.Usage == nil {
			return
		}
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed":
			r.rec(ev.Response.Usage.entry(firstOf(r.reqModel, ev.Response.Model)))
		}
	case apiChat:
		var ev chatBody
		if json.Unmarshal(data, &ev) == nil && ev.Usage != nil {
			r.rec(ev.Usage.entry(firstOf(r.reqModel, ev.Model)))
		}
	case apiGemini:
		var ev geminiBody
		if json.Unmarshal(data, &ev) != nil || ev.Usage == nil {
			return
		}
		// Every chunk carries the usage so far; the one that finishes the
		// reply carries its whole.
		if ev.finished() {
			r.rec(ev.Usage.entry(r.reqModel))
			r.gemini = nil
		} else {
			r.gemini = ev.Usage
		}
	}
}

// json reads a whole JSON reply.
func (r *reader) json(body []byte) {
	switch r.api {
	case apiAnthropic:
		var v struct {
			Model string          `json:"model"`
			Usage *anthropicUsage `json:"usage"`
		}
		if json.Unmarshal(body, &v) == nil && v.Usage != nil {
			r.rec(v.Usage.entry(firstOf(v.Model, r.reqModel)))
		}
	case apiResponses:
		var v responsesBody
		if json.Unmarshal(body, &v) == nil && v.Usage != nil {
			r.rec(v.Usage.entry(firstOf(r.reqModel, v.Model)))
		}
	case apiChat:
		var v chatBody
		if json.Unmarshal(body, &v) == nil && v.Usage != nil {
			r.rec(v.Usage.entry(firstOf(r.reqModel, v.Model)))
		}
	case apiGemini:
		// streamGenerateContent without alt=sse is a JSON array of chunks.
		var chunks []geminiBody
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			if json.Unmarshal(body, &chunks) != nil {
				return
			}
		} else {
			var one geminiBody
			if json.Unmarshal(body, &one) != nil {
				return
			}
			chunks = []geminiBody{one}
		}
		for i := len(chunks) - 1; i >= 0; i-- {
			if chunks[i].Usage != nil {
				r.rec(chunks[i].Usage.entry(r.reqModel))
				return
			}
		}
	}
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// anthropicUsage is Anthropic's usage: input excludes the cache tokens.
// Pointers tell a field message_delta left out from a zero.
type anthropicUsage struct {
	Input         *int64 `json:"input_tokens"`
	CacheWrite    *int64 `json:"cache_creation_input_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
	Output        *int64 `json:"output_tokens"`
	CacheCreation *struct {
		OneHour int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	ServiceTier string `json:"service_tier"`
}

// over returns u with the fields it lacks taken from base.
func (u anthropicUsage) over(base *anthropicUsage) anthropicUsage {
	if base == nil {
		return u
	}
	pick := func(a, b *int64) *int64 {
		if a != nil {
			return a
		}
		return b
	}
	u.Input, u.CacheWrite, u.CacheRead, u.Output = pick(u.Input, base.Input), pick(u.CacheWrite, base.CacheWrite),
		pick(u.CacheRead, base.CacheRead), pick(u.Output, base.Output)
	if u.CacheCreation == nil {
		u.CacheCreation = base.CacheCreation
	}
	if u.ServiceTier == "" {
		u.ServiceTier = base.ServiceTier
	}
	return u
}

func (u anthropicUsage) entry(model string) entry {
	n := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	e := entry{API: apiAnthropic, Model: model, Input: n(u.Input) + n(u.CacheRead) + n(u.CacheWrite), CacheRead: n(u.CacheRead),
		CacheWrite: n(u.CacheWrite), Output: n(u.Output), Tier: u.ServiceTier}
	if u.CacheCreation != nil {
		e.CacheWr1h = u.CacheCreation.OneHour
	}
	return e
}

type responsesBody struct {
	Model string          `json:"model"`
	Usage *responsesUsage `json:"usage"`
}

// responsesUsage is OpenAI Responses' usage: input counts the cached
// tokens, output the reasoning ones.
type responsesUsage struct {
	Input        int64 `json:"input_tokens"`
	InputDetails struct {
		Cached int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	Output        int64 `json:"output_tokens"`
	OutputDetails struct {
		Reasoning int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u responsesUsage) entry(model string) entry {
	return entry{API: apiResponses, Model: model, Input: u.Input, CacheRead: u.InputDetails.Cached, Output: u.Output,
		Reasoning: u.OutputDetails.Reasoning}
}

type chatBody struct {
	Model string     `json:"model"`
	Usage *chatUsage `json:"usage"`
}

// chatUsage is Chat Completions' usage, counted as Responses' is.
type chatUsage struct {
	Prompt        int64 `json:"prompt_tokens"`
	PromptDetails struct {
		Cached int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	Completion        int64 `json:"completion_tokens"`
	CompletionDetails struct {
		Reasoning int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u chatUsage) entry(model string) entry {
	return entry{API: apiChat, Model: model, Input: u.Prompt, CacheRead: u.PromptDetails.Cached, Output: u.Completion,
		Reasoning: u.CompletionDetails.Reasoning}
}

type geminiUsage struct {
	Prompt     int64 `json:"promptTokenCount"`
	Candidates int64 `json:"candidatesTokenCount"`
	Cached     int64 `json:"cachedContentTokenCount"`
	Thoughts   int64 `json:"thoughtsTokenCount"`
}

type geminiBody struct {
	Candidates []struct {
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	Usage *geminiUsage `json:"usageMetadata"`
}

func (g geminiBody) finished() bool {
	for _, c := range g.Candidates {
		if c.FinishReason != "" {
			return true
		}
	}
	return false
}

// entry: Gemini's prompt counts the cached tokens; Purser counts thoughts
// as output, as the provider bills them.
func (u geminiUsage) entry(model string) entry {
	return entry{API: apiGemini, Model: model, Input: u.Prompt, CacheRead: u.Cached, Output: u.Candidates + u.Thoughts, Reasoning: u.Thoughts}
}
