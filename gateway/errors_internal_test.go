package gateway

import (
	"net/http"
	"testing"
)

// Every protocol's error body for every status the door answers with, as
// the agents' SDKs read them (pinned: the table must keep each byte).
func TestErrorBodyPerProtocolAndStatus(t *testing.T) {
	const m = "purser: x"
	anthropic := func(typ string) string {
		return `{"error":{"message":"purser: x","type":"` + typ + `"},"type":"error"}`
	}
	gemini := func(code, st string) string {
		return `{"error":{"code":` + code + `,"message":"purser: x","status":"` + st + `"}}`
	}
	openai := func(typ, code string) string {
		return `{"error":{"code":` + code + `,"message":"purser: x","param":null,"type":"` + typ + `"}}`
	}
	for _, tc := range []struct {
		protocol string
		status   int
		want     string
	}{
		{Anthropic, http.StatusPaymentRequired, anthropic("billing_error")},
		{Anthropic, http.StatusUnauthorized, anthropic("authentication_error")},
		{Anthropic, http.StatusNotFound, anthropic("not_found_error")},
		{Anthropic, http.StatusBadGateway, anthropic("api_error")},
		{Anthropic, http.StatusBadRequest, anthropic("invalid_request_error")},
		{Anthropic, http.StatusMisdirectedRequest, anthropic("invalid_request_error")},
		{Gemini, http.StatusPaymentRequired, gemini("402", "FAILED_PRECONDITION")},
		{Gemini, http.StatusUnauthorized, gemini("401", "UNAUTHENTICATED")},
		{Gemini, http.StatusNotFound, gemini("404", "NOT_FOUND")},
		{Gemini, http.StatusBadGateway, gemini("502", "UNAVAILABLE")},
		{Gemini, http.StatusRequestEntityTooLarge, gemini("413", "INVALID_ARGUMENT")},
		{OpenAIChat, http.StatusPaymentRequired, openai("insufficient_quota", `"purser_budget_exhausted"`)},
		{OpenAIResponses, http.StatusPaymentRequired, openai("insufficient_quota", `"purser_budget_exhausted"`)},
		{OpenAIChat, http.StatusUnauthorized, openai("invalid_request_error", `"invalid_api_key"`)},
		{OpenAIResponses, http.StatusNotFound, openai("invalid_request_error", "null")},
		{OpenAIChat, http.StatusBadGateway, openai("server_error", "null")},
		{OpenAIChat, http.StatusBadRequest, openai("invalid_request_error", "null")},
	} {
		if got := string(errorBody(tc.protocol, tc.status, m)); got != tc.want {
			t.Errorf("%s %d:\n got %s\nwant %s", tc.protocol, tc.status, got, tc.want)
		}
	}
	for protocol, want := range map[string]string{
		Anthropic:       "event: error\ndata: " + anthropic("billing_error") + "\n\n",
		OpenAIResponses: "event: error\ndata: {\"code\":\"purser_budget_exhausted\",\"message\":\"purser: x\",\"type\":\"error\"}\n\n",
		OpenAIChat:      "data: " + openai("insufficient_quota", `"purser_budget_exhausted"`) + "\n\n",
		Gemini:          "data: " + gemini("402", "FAILED_PRECONDITION") + "\n\n",
	} {
		if got := string(streamError(protocol, m)); got != want {
			t.Errorf("%s stream error:\n got %q\nwant %q", protocol, got, want)
		}
	}
}
