package gateway

import (
	"encoding/json"
	"net/http"
)

// errorBody is msg in the error shape of protocol's provider, so that the
// agent's SDK reads it as it reads the provider's own.
func errorBody(protocol string, status int, msg string) []byte {
	var v any
	switch protocol {
	case Anthropic:
		typ := "invalid_request_error"
		switch status {
		case http.StatusPaymentRequired:
			typ = "billing_error"
		case http.StatusUnauthorized:
			typ = "authentication_error"
		case http.StatusNotFound:
			typ = "not_found_error"
		case http.StatusBadGateway:
			typ = "api_error"
		}
		v = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	case Gemini:
		st := "INVALID_ARGUMENT"
		switch status {
		case http.StatusPaymentRequired:
			st = "FAILED_PRECONDITION"
		case http.StatusUnauthorized:
			st = "UNAUTHENTICATED"
		case http.StatusNotFound:
			st = "NOT_FOUND"
		case http.StatusBadGateway:
			st = "UNAVAILABLE"
		}
		v = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
	default:
		typ, code := "invalid_request_error", any(nil)
		switch status {
		case http.StatusPaymentRequired:
			typ, code = "insufficient_quota", "purser_budget_exhausted"
		case http.StatusUnauthorized:
			typ, code = "invalid_request_error", "invalid_api_key"
		case http.StatusBadGateway:
			typ = "server_error"
		}
		v = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
	}
	b, _ := json.Marshal(v)
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
