#!/usr/bin/env python3
"""A tiny agent for the tests: it speaks Anthropic Messages to the base URL
and key its environment gives it, as any agent CLI would. It makes the
request it is asked for (the prompt, on argv[1]), with tools and streamed,
then a side request of its own (a title, no tools), and prints the text.
It writes what it saw of its environment to $AGENT_SEEN."""
import json, os, sys, urllib.request, urllib.error

base = os.environ["ANTHROPIC_BASE_URL"]
key = os.environ["ANTHROPIC_API_KEY"]
seen = os.environ.get("AGENT_SEEN")
if seen:
    with open(seen, "w") as f:
        json.dump({"key": key, "base": base, "env": sorted(os.environ.values())}, f)

direct = os.environ.get("AGENT_TRY_DIRECT")
if direct:
    # A repository's settings pointing the agent at the provider itself:
    # outside a box it gets through; in a box only the door does.
    try:
        urllib.request.urlopen(direct + "/v1/models", timeout=3).read()
        open("direct.txt", "w").write("reached the provider around the door\n")
    except Exception:
        pass

def call(body):
    req = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(),
                                 headers={"x-api-key": key, "content-type": "application/json",
                                          "anthropic-version": "2023-06-01"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            out = []
            for line in r:
                out.append(line.decode())
            return "".join(out)
    except urllib.error.HTTPError as e:
        print("HTTP", e.code, e.read().decode(), flush=True)
        sys.exit(1)

prompt = sys.argv[1]
print(call({"model": os.environ.get("PURSER_MODEL", "m"), "max_tokens": 1000, "stream": True,
            "messages": [{"role": "user", "content": prompt}],
            "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]})[:200], flush=True)
print(call({"model": "claude-haiku-4-5", "max_tokens": 20,
            "messages": [{"role": "user", "content": "title for: " + prompt}]})[:200], flush=True)
print("done")
