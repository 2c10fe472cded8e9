#!/usr/bin/env python3
"""A stand-in Claude Code that makes a request it does not report: before
its turn it asks the model for a title for the session (a request with no
tools, on a small model, as Claude Code's title generation), says nothing of
it, then makes its turn's request and reports that one alone on stdout, in
Claude Code's stream-json (init, the assistant message with its usage, the
result with its usage and a total_cost_usd of its own reckoning).

Both requests go to ANTHROPIC_BASE_URL, non-streamed."""
import json, os, sys, urllib.request

base = os.environ["ANTHROPIC_BASE_URL"]


def ask(body):
    req = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json", "x-api-key": os.environ.get("ANTHROPIC_API_KEY", "none")})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


sys.stdin.read()
# The title: never on stdout.
ask({"model": "claude-haiku-4-5", "max_tokens": 20,
     "messages": [{"role": "user", "content": "Write a 5-word title for: create a file"}]})
# The turn: reported.
reply = ask({"model": "claude-sonnet-4-5", "max_tokens": 100,
             "messages": [{"role": "user", "content": "Create mock_out.txt."}],
             "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]})
sid = "7a1c2f4e-0000-4000-8000-000000000001"
u = reply["usage"]
print(json.dumps({"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": sid, "model": reply["model"]}))
print(json.dumps({"type": "assistant", "session_id": sid, "parent_tool_use_id": None,
                  "message": {"id": reply["id"], "type": "message", "role": "assistant", "model": reply["model"],
                              "content": reply["content"], "usage": u}}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": sid,
                  "num_turns": 1, "total_cost_usd": 0.0123, "usage": u,
                  "modelUsage": {reply["model"]: {"inputTokens": u["input_tokens"], "outputTokens": u["output_tokens"],
                                                  "cacheReadInputTokens": u.get("cache_read_input_tokens", 0),
                                                  "cacheCreationInputTokens": u.get("cache_creation_input_tokens", 0),
                                                  "costUSD": 0.0123}}}))
sys.stdout.flush()
