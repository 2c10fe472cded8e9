package purser

import (
	"context"

	"github.com/purser-dev/purser/budget"
)

// WireRequest is one model request an agent sends through Purser's door
// (the gateway), as the door reads it before forwarding anything: the
// engine admits each one, not only the Purser call that started the agent.
type WireRequest struct {
	// Protocol is the wire protocol the request speaks: "anthropic",
	// "openai-chat", "openai-responses" or "gemini".
	Protocol string
	// Model is the model the request names.
	Model string
	// InputTokens is the request's input as counted from its body.
	InputTokens int64
	// MaxOutputTokens is the output bound the request asks for (max_tokens
	// and its kin); 0 when it names none.
	MaxOutputTokens int64
	// Stream reports whether the reply is streamed (it can be cut mid-reply).
	Stream bool
	// SubAgent is who in the agent sent the request, as the door tells it
	// from the conversation: 0 for the main agent, k for the k-th
	// sub-agent spawn it saw on this lane (gateway/subagent.go).
	SubAgent int
	// SubAgentName is the k-th sub-agent's type and description
	// ("general-purpose: find the flaky test"); "" for the main agent.
	SubAgentName string
}

// WireGrant is what the engine admitted a WireRequest for.
type WireGrant struct {
	// Model is the model to forward the request to: the request's own, or
	// its cheaper tier when the task's degrade policy maps it in WARNING.
	Model string
	// MaxOutputTokens is the output bound to forward (the request's,
	// clamped to the headroom); 0 leaves the request's own.
	MaxOutputTokens int64
	// Actions says each change the engine made to the request and why, one
	// line each, for the call's record and the live view.
	Actions []string
	// Hint is the short note of what remains that the door appends after
	// the request's last cache breakpoint (budgetHint:); "" adds nothing.
	Hint string
	// Release ends the request's hold once its usage is booked (or it
	// ended without any); it may be nil and must be safe to call twice.
	Release func()
	// WrapUp, when not "", is the wrap-up turn (wrapUp:): instead of the
	// request as the agent sent it, the door forwards it with no tools (and
	// no tool choice) and WrapUp appended as the last user message, bounded
	// by MaxOutputTokens, returns the reply to the agent as the reply to its
	// request, and hands the reply's text to WrapUpDone. Its usage is
	// reported and its hold released as any request's.
	WrapUp string
	// WrapUpDone receives the text of the wrap-up reply (never nil when
	// WrapUp is set), for STATUS.md.
	WrapUpDone func(text string)
	// Used, when not nil, receives the reply's usage as the door read it,
	// before Release: what a sub-agent spent counts against its own cap
	// whoever books the ledger (the door, or the CLI's own report).
	Used func(ev budget.UsageEvent)
}

// WireAdmitter admits the requests of one call at Purser's door. A
// refusal is an error whose text the door hands the agent in the
// provider's own error shape ("purser: budget exhausted (hard usd $1.00)");
// it is a *budget.BudgetExhaustedError (or wraps one) when a HARD cap would
// be crossed. The usage of an admitted request is reported through the
// call's UsageFunc as it streams, exactly as a backend's own report is.
type WireAdmitter interface {
	AdmitWire(ctx context.Context, r WireRequest) (WireGrant, error)
}
