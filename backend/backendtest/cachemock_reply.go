package backendtest

import (
	"encoding/json"
	"fmt"
)

// replyEvents is the mock's reply to p, billed as rq: one JSON body, or
// the events of a stream in the API's own shape, usage where the API puts
// it (so a meter reads it as from the provider).
func replyEvents(p prompt, rq CacheRequest, text string) [][]byte {
	switch p.api {
	case "anthropic":
		return anthropicReply(p, rq, text)
	case "chat":
		return chatReply(p, rq, text)
	default:
		return responsesReply(p, rq, text)
	}
}

// sse is one server-sent event (name "" for data only).
func sse(name string, data any) []byte {
	b, _ := json.Marshal(data)
	if name == "" {
		return []byte(fmt.Sprintf("data: %s\n\n", b))
	}
	return []byte(fmt.Sprintf("event: %s\ndata: %s\n\n", name, b))
}

func jsonBody(v any) [][]byte {
	b, _ := json.Marshal(v)
	return [][]byte{b}
}

type obj = map[string]any

func anthropicReply(p prompt, rq CacheRequest, text string) [][]byte {
	stop := "end_turn"
	if rq.Cut {
		stop = "max_tokens"
	}
	usage := obj{"input_tokens": rq.Input - rq.CacheRead - rq.CacheWrite, "cache_creation_input_tokens": rq.CacheWrite,
		"cache_read_input_tokens": rq.CacheRead, "output_tokens": rq.Output}
	msg := obj{"id": "msg_cachemock", "type": "message", "role": "assistant", "model": p.model,
		"content": []obj{{"type": "text", "text": text}}, "stop_reason": stop, "usage": usage}
	if !p.stream {
		return jsonBody(msg)
	}
	start := obj{}
	for k, v := range msg {
		start[k] = v
	}
	startUsage := obj{}
	for k, v := range usage {
		startUsage[k] = v
	}
	startUsage["output_tokens"] = 1
	start["content"], start["stop_reason"], start["usage"] = []obj{}, nil, startUsage
	return [][]byte{
		sse("message_start", obj{"type": "message_start", "message": start}),
		sse("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}}),
		sse("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": text}}),
		sse("content_block_stop", obj{"type": "content_block_stop", "index": 0}),
		sse("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop}, "usage": obj{"output_tokens": rq.Output}}),
		sse("message_stop", obj{"type": "message_stop"}),
	}
}

func chatReply(p prompt, rq CacheRequest, text string) [][]byte {
	finish := "stop"
	if rq.Cut {
		finish = "length"
	}
	usage := obj{"prompt_tokens": rq.Input, "completion_tokens": rq.Output, "total_tokens": rq.Input + rq.Output,
		"prompt_tokens_details": obj{"cached_tokens": rq.CacheRead}}
	if !p.stream {
		return jsonBody(obj{"id": "chatcmpl-cachemock", "object": "chat.completion", "model": p.model,
			"choices": []obj{{"index": 0, "message": obj{"role": "assistant", "content": text}, "finish_reason": finish}}, "usage": usage})
	}
	chunk := func(choices []obj, usage any) obj {
		return obj{"id": "chatcmpl-cachemock", "object": "chat.completion.chunk", "model": p.model, "choices": choices, "usage": usage}
	}
	return [][]byte{
		sse("", chunk([]obj{{"index": 0, "delta": obj{"role": "assistant", "content": text}, "finish_reason": nil}}, nil)),
		sse("", chunk([]obj{{"index": 0, "delta": obj{}, "finish_reason": finish}}, nil)),
		sse("", chunk([]obj{}, usage)),
		[]byte("data: [DONE]\n\n"),
	}
}

func responsesReply(p prompt, rq CacheRequest, text string) [][]byte {
	status, done := "completed", "response.completed"
	var incomplete any
	if rq.Cut {
		status, done, incomplete = "incomplete", "response.incomplete", obj{"reason": "max_output_tokens"}
	}
	resp := obj{"id": "resp_cachemock", "object": "response", "model": p.model, "status": status, "incomplete_details": incomplete,
		"output": []obj{{"type": "message", "role": "assistant", "content": []obj{{"type": "output_text", "text": text}}}},
		"usage": obj{"input_tokens": rq.Input, "input_tokens_details": obj{"cached_tokens": rq.CacheRead},
			"output_tokens": rq.Output, "output_tokens_details": obj{"reasoning_tokens": 0}, "total_tokens": rq.Input + rq.Output}}
	if !p.stream {
		return jsonBody(resp)
	}
	created := obj{"id": "resp_cachemock", "object": "response", "model": p.model, "status": "in_progress", "output": []obj{}}
	return [][]byte{
		sse("response.created", obj{"type": "response.created", "response": created}),
		sse("response.output_text.delta", obj{"type": "response.output_text.delta", "delta": text}),
		sse(done, obj{"type": done, "response": resp}),
	}
}
