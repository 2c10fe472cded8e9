#!/usr/bin/env python3
"""A tiny interactive agent for purser shell's tests: it reads its user's
lines on stdin and sends each as a model request (Anthropic Messages, no
tools) to the base URL and key its environment gives it, printing the reply
or the error it got. "exit N" exits N; "env" prints whether it sees the real
key. Ctrl-C (SIGINT) is its own: it says so and carries on."""
import json, os, signal, sys, urllib.request, urllib.error

base = os.environ["ANTHROPIC_BASE_URL"]
key = os.environ["ANTHROPIC_API_KEY"]
signal.signal(signal.SIGINT, lambda *a: print("agent: got SIGINT, carrying on", flush=True))
seen = os.environ.get("AGENT_SEEN")
if seen:
    with open(seen, "w") as f:
        json.dump({"key": key, "base": base, "env": sorted(os.environ.values())}, f)
print("agent: ready", flush=True)

def call(text):
    body = {"model": "claude-haiku-4-5", "max_tokens": 20, "messages": [{"role": "user", "content": text}]}
    req = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(),
                                 headers={"x-api-key": key, "content-type": "application/json",
                                          "anthropic-version": "2023-06-01"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            reply = json.load(r)
            print("agent: reply", reply["content"][0]["text"], flush=True)
    except urllib.error.HTTPError as e:
        print("agent: HTTP", e.code, e.read().decode(), flush=True)
    except Exception as e:
        print("agent: error", e, flush=True)

for line in sys.stdin:
    line = line.strip()
    if line.startswith("exit"):
        sys.exit(int(line[4:] or 0))
    if line:
        call(line)
print("agent: end of input", flush=True)
