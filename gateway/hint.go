package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// appendHint adds the budget note (WireGrant.Hint) at the very end of the
// request's conversation: inside the last message (or input item), after
// every byte that was there. A provider's prompt cache keys on the bytes of
// the prefix up to a cache breakpoint, and every breakpoint comes before
// the end: the cached prefix is byte for byte what the agent sent, and only
// the uncached tail grows by the note. A body of a shape it does not know
// is returned unchanged, with an error.
func appendHint(api string, body []byte, hint string) ([]byte, error) {
	note := "\n\n" + hint
	switch api {
	case "anthropic", "chat":
		return inLast(body, "messages", func(msg []byte) ([]byte, error) {
			return appendToContent(msg, "content", note, `{"type":"text","text":`+strconv.Quote(note)+`}`)
		})
	case "responses":
		in := getField(body, "input")
		switch {
		case bytes.HasPrefix(in, []byte(`"`)):
			return setField(body, "input", string(appendToString(in, note)))
		case bytes.HasPrefix(in, []byte(`[`)):
			item := `{"role":"user","content":[{"type":"input_text","text":` + strconv.Quote(hint) + `}]}`
			return setField(body, "input", string(appendToArray(in, item)))
		}
	case "gemini":
		return inLast(body, "contents", func(c []byte) ([]byte, error) {
			parts := getField(c, "parts")
			if !bytes.HasPrefix(parts, []byte(`[`)) {
				return nil, errors.New("no parts")
			}
			return setField(c, "parts", string(appendToArray(parts, `{"text":`+strconv.Quote(note)+`}`)))
		})
	}
	return body, errors.New("no conversation to add the hint to")
}

// inLast rewrites the last element of the top-level array field with f.
func inLast(body []byte, field string, f func([]byte) ([]byte, error)) ([]byte, error) {
	arr := getField(body, field)
	sp, ok := lastElement(arr)
	if !ok {
		return body, errors.New("no " + field)
	}
	el, err := f(arr[sp.start:sp.end])
	if err != nil {
		return body, err
	}
	out := append(append(append([]byte{}, arr[:sp.start]...), el...), arr[sp.end:]...)
	return setField(body, field, string(out))
}

// appendToContent adds note to a message's content: to the end of a string
// content, or as a block after the last of an array's.
func appendToContent(msg []byte, field, note, block string) ([]byte, error) {
	c := getField(msg, field)
	switch {
	case bytes.HasPrefix(c, []byte(`"`)):
		return setField(msg, field, string(appendToString(c, note)))
	case bytes.HasPrefix(c, []byte(`[`)):
		return setField(msg, field, string(appendToArray(c, block)))
	}
	return nil, errors.New("no content")
}

// appendToString adds s before a JSON string's closing quote.
func appendToString(raw []byte, s string) []byte {
	q := strconv.Quote(s)
	return append(append(append([]byte{}, raw[:len(raw)-1]...), q[1:len(q)-1]...), '"')
}

// appendToArray adds a raw element before a JSON array's closing bracket.
func appendToArray(raw []byte, el string) []byte {
	end := bytes.LastIndexByte(raw, ']')
	sep := ","
	if len(bytes.TrimSpace(raw[1:end])) == 0 {
		sep = ""
	}
	return append(append(append([]byte{}, raw[:end]...), sep+el...), raw[end:]...)
}

// lastElement is the span of a JSON array's last element.
func lastElement(arr []byte) (span, bool) {
	if !bytes.HasPrefix(arr, []byte(`[`)) {
		return span{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(arr))
	if _, err := dec.Token(); err != nil {
		return span{}, false
	}
	var sp span
	found := false
	for dec.More() {
		start := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return span{}, false
		}
		end := int(dec.InputOffset())
		for start < end && (isSpace(arr[start]) || arr[start] == ',') {
			start++
		}
		sp, found = span{start, end}, true
	}
	return sp, found
}
