package gateway

import (
	"encoding/json"
	"net/http"
)

// errorName is how a provider names an error status: Anthropic's and
// OpenAI's error type or Gemini's status, and OpenAI's code (nil: none).
type errorName struct {
	name string
	code any
}

// errorShape is one provider's error body: the names of the statuses the
// door answers with (any other status takes the name of status 0), and
// the body around a message.
type errorShape struct {
	names map[int]errorName
	body  func(status int, n errorName, msg string) any
}

// openAIErrors is OpenAI's error body, which both its protocols use.
var openAIErrors = errorShape{
	names: map[int]errorName{0: {name: "invalid_request_error"},
		http.StatusPaymentRequired: {name: "insufficient_quota", code: "purser_budget_exhausted"},
		http.StatusUnauthorized:    {name: "invalid_request_error", code: "invalid_api_key"},
		http.StatusBadGateway:      {name: "server_error"}},
	body: func(_ int, n errorName, msg string) any {
		return map[string]any{"error": map[string]any{"message": msg, "type": n.name, "param": nil, "code": n.code}}
	},
}

// errorShapes are the providers' error bodies, so that an agent's SDK reads
// the door's refusal as it reads its provider's own.
var errorShapes = map[string]errorShape{
	Anthropic: {
		names: map[int]errorName{0: {name: "invalid_request_error"}, http.StatusPaymentRequired: {name: "billing_error"},
			http.StatusUnauthorized: {name: "authentication_error"}, http.StatusNotFound: {name: "not_found_error"},
			http.StatusBadGateway: {name: "api_error"}},
		body: func(_ int, n errorName, msg string) any {
			return map[string]any{"type": "error", "error": map[string]any{"type": n.name, "message": msg}}
		},
	},
	Gemini: {
		names: map[int]errorName{0: {name: "INVALID_ARGUMENT"}, http.StatusPaymentRequired: {name: "FAILED_PRECONDITION"},
			http.StatusUnauthorized: {name: "UNAUTHENTICATED"}, http.StatusNotFound: {name: "NOT_FOUND"},
			http.StatusBadGateway: {name: "UNAVAILABLE"}},
		body: func(status int, n errorName, msg string) any {
			return map[string]any{"error": map[string]any{"code": status, "message": msg, "status": n.name}}
		},
	},
	OpenAIChat:      openAIErrors,
	OpenAIResponses: openAIErrors,
}

// errorBody is msg in the error shape of protocol's provider, with the
// provider's name for status.
func errorBody(protocol string, status int, msg string) []byte {
	shape, ok := errorShapes[protocol]
	if !ok {
		shape = errorShapes[OpenAIChat]
	}
	n, ok := shape.names[status]
	if !ok {
		n = shape.names[0]
	}
	b, _ := json.Marshal(shape.body(status, n, msg))
	return b
}

// streamError is the event that tells an agent, mid-stream, why its reply
// ends: Anthropic's error event, an OpenAI-style error, Gemini's error.
func streamError(protocol, msg string) []byte {
	body := errorBody(protocol, http.StatusPaymentRequired, msg)
	switch protocol {
	case Anthropic:
		return append(append([]byte("event: error\ndata: "), body...), "\n\n"...)
	case OpenAIResponses:
		b, _ := json.Marshal(map[string]any{"type": "error", "code": "purser_budget_exhausted", "message": msg})
		return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	}
	return append(append([]byte("data: "), body...), "\n\n"...)
}
