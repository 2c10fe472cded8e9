package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/purser-dev/purser"
)

// request is what the door reads of a model request's body.
type request struct {
	model string
	input int64 // input tokens, counted (countInput)
	// learned says input came from a rate learned of earlier replies, not
	// from bytes/4.
	learned bool
	maxOut  int64  // the output bound asked for; 0 for none
	field   string // the top-level field maxOut came from ("" for none)
	stream  bool
	// stateful: the body names input the provider holds (a previous
	// response, a conversation, cached content), billed beyond its bytes,
	// so its reply teaches nothing of tokens per byte (learnRate).
	stateful bool
}

// readRequest reads the model, stream flag and output bound of a body,
// and counts its input as sent to upstream (countInput).
func readRequest(rt route, body []byte, upstream string) request {
	req := readFields(rt, body)
	req.input, req.learned = countInput(upstream, req.model, len(body))
	return req
}

// readFields reads the model, stream flag and output bound of a body.
func readFields(rt route, body []byte) request {
	req := request{model: rt.model, stream: rt.stream}
	var v struct {
		Model               string `json:"model"`
		Stream              bool   `json:"stream"`
		MaxTokens           *int64 `json:"max_tokens"`
		MaxCompletionTokens *int64 `json:"max_completion_tokens"`
		MaxOutputTokens     *int64 `json:"max_output_tokens"`
		GenerationConfig    *struct {
			MaxOutputTokens *int64 `json:"maxOutputTokens"`
		} `json:"generationConfig"`
		PreviousResponseID string          `json:"previous_response_id"`
		Conversation       json.RawMessage `json:"conversation"`
		CachedContent      string          `json:"cachedContent"`
	}
	if json.Unmarshal(body, &v) != nil {
		return req
	}
	req.stateful = v.PreviousResponseID != "" || v.CachedContent != "" || (len(v.Conversation) > 0 && string(v.Conversation) != "null")
	if req.model == "" {
		req.model = v.Model
	}
	req.stream = req.stream || v.Stream
	pick := func(field string, p *int64) {
		if p != nil && req.field == "" {
			req.maxOut, req.field = max(*p, 0), field
		}
	}
	switch rt.api {
	case "anthropic":
		pick("max_tokens", v.MaxTokens)
	case "chat":
		pick("max_completion_tokens", v.MaxCompletionTokens)
		pick("max_tokens", v.MaxTokens)
	case "responses":
		pick("max_output_tokens", v.MaxOutputTokens)
	case "gemini":
		if v.GenerationConfig != nil {
			pick("generationConfig.maxOutputTokens", v.GenerationConfig.MaxOutputTokens)
		}
	}
	return req
}

// applyGrant rewrites a request as granted: the model, and the output
// bound clamped (added where the request named none). Every other byte of
// the body is kept as it was, in its order: a provider's prompt cache keys
// on the bytes of the prefix.
func applyGrant(rt route, req request, body []byte, path string, g purser.WireGrant) ([]byte, string, error) {
	var err error
	if g.Model != "" && g.Model != req.model {
		if rt.api == "gemini" {
			m := geminiCall.FindStringSubmatchIndex(path)
			if m == nil {
				return nil, "", fmt.Errorf("cannot name model %s in path %s", g.Model, path)
			}
			path = path[:m[2]] + url.PathEscape(g.Model) + path[m[3]:]
		} else if body, err = setField(body, "model", strconv.Quote(g.Model)); err != nil {
			return nil, "", err
		}
	}
	if g.MaxOutputTokens > 0 && (req.maxOut == 0 || g.MaxOutputTokens < req.maxOut) {
		n := strconv.FormatInt(g.MaxOutputTokens, 10)
		switch rt.api {
		case "anthropic":
			if body, err = setField(body, "max_tokens", n); err == nil {
				body, err = clampThinking(body, g.MaxOutputTokens)
			}
		case "chat":
			body, err = setField(body, firstOf(req.field, "max_completion_tokens"), n)
		case "responses":
			body, err = setField(body, "max_output_tokens", n)
		case "gemini":
			gc := getField(body, "generationConfig")
			if gc == nil {
				gc = []byte("{}")
			}
			if gc, err = setField(gc, "maxOutputTokens", n); err == nil {
				body, err = setField(body, "generationConfig", string(gc))
			}
		}
		if err != nil {
			return nil, "", err
		}
	}
	return body, path, nil
}

// span is where a top-level field's value lies in a JSON object.
type span struct{ start, end int }

// fieldSpan finds a top-level field of a JSON object: its value's span,
// whether it is there, and the offset of the object's closing brace.
func fieldSpan(obj []byte, key string) (sp span, found bool, closing int, err error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return span{}, false, 0, fmt.Errorf("the request body is not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return span{}, false, 0, fmt.Errorf("the request body is not valid JSON: %w", err)
		}
		k, _ := tok.(string)
		after := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return span{}, false, 0, fmt.Errorf("the request body is not valid JSON: %w", err)
		}
		end := int(dec.InputOffset())
		if k == key && !found {
			start := after + bytes.IndexByte(obj[after:end], ':') + 1
			for start < end && isSpace(obj[start]) {
				start++
			}
			sp, found = span{start, end}, true
		}
	}
	if _, err := dec.Token(); err != nil {
		return span{}, false, 0, fmt.Errorf("the request body is not valid JSON: %w", err)
	}
	return sp, found, int(dec.InputOffset()) - 1, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// getField is a top-level field's raw value, or nil.
func getField(obj []byte, key string) []byte {
	sp, found, _, err := fieldSpan(obj, key)
	if err != nil || !found {
		return nil
	}
	return obj[sp.start:sp.end]
}

// setField sets a top-level field to a raw JSON value: in place when it is
// there, else added before the closing brace (after every byte the
// request already had).
func setField(obj []byte, key, raw string) ([]byte, error) {
	sp, found, closing, err := fieldSpan(obj, key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+len(key)+len(raw)+4)
	if found {
		out = append(append(append(out, obj[:sp.start]...), raw...), obj[sp.end:]...)
		return out, nil
	}
	sep := ","
	if len(bytes.TrimSpace(obj[1:closing])) == 0 {
		sep = ""
	}
	out = append(out, obj[:closing]...)
	out = append(out, sep+strconv.Quote(key)+":"+raw...)
	return append(out, obj[closing:]...), nil
}

// parseQuery parses a query, keeping what it can.
func parseQuery(q string) url.Values {
	v, _ := url.ParseQuery(q)
	return v
}

// minThinking is the smallest thinking budget Anthropic takes.
const minThinking = 1024

// clampThinking keeps an Anthropic request valid under a clamped
// max_tokens: extended thinking's budget_tokens must stay below it, so it
// is lowered, or thinking switched off where the bound leaves less than
// the smallest budget the API takes.
func clampThinking(body []byte, maxTokens int64) ([]byte, error) {
	th := getField(body, "thinking")
	if th == nil {
		return body, nil
	}
	var v struct {
		Type   string `json:"type"`
		Budget int64  `json:"budget_tokens"`
	}
	if json.Unmarshal(th, &v) != nil || v.Type != "enabled" || v.Budget < maxTokens {
		return body, nil
	}
	if maxTokens-1 < minThinking {
		return setField(body, "thinking", `{"type":"disabled"}`)
	}
	th, err := setField(th, "budget_tokens", strconv.FormatInt(maxTokens-1, 10))
	if err != nil {
		return nil, err
	}
	return setField(body, "thinking", string(th))
}
