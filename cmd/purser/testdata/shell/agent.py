#!/usr/bin/env python3
"""A tiny interactive agent for purser shell's tests: it reads its user's
lines on stdin and sends each as a model request (Anthropic Messages, no
tools) to the base URL and key its environment gives it, printing the reply
or the error it got. "exit N" exits N; "env" prints whether it sees the real
key. Ctrl-C (SIGINT) is its own: it says so and carries on."""
import json, os, signal, sys, urllib.request, urllib.error

base = os.environ["ANTHROPIC_BASE_URL"]
key = os.environ["ANTHROPIC_API_KEY"]
# Each SIGINT delivered writes a byte here (at C level: two that arrive
# before the handler runs are still two), so the agent says how many it got.
wake_r, wake_w = os.pipe()
os.set_blocking(wake_r, False)
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)

def on_int(*_):
    try:
        n = len(os.read(wake_r, 64))
    except BlockingIOError:
        n = 0
    print("agent: got SIGINT x%d, carrying on" % n, flush=True)

signal.signal(signal.SIGINT, on_int)
seen = os.environ.get("AGENT_SEEN")
if seen:
    with open(seen, "w") as f:
        json.dump({"key": key, "base": base, "env": sorted(os.environ.values())}, f)
def foreground():
    """Whether the agent is in its terminal's foreground process group."""
    try:
        return os.getpgrp() == os.tcgetpgrp(0)
    except OSError:
        return False

print("agent: ready, foreground" if foreground() else "agent: ready", flush=True)

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
