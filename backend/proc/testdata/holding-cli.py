#!/usr/bin/env python3
"""A stand-in agent CLI that dies holding a reply: it sends one model request
to the base URL its backend gave it, reads the whole reply, writes nothing of
it down (no usage on stdout, no session file), says it has the reply by
creating ./replied, and then waits to be killed -- as a real CLI killed after
its reply arrived but before it wrote the reply's usage anywhere.

HOLDING_API names the dialect: anthropic (ANTHROPIC_BASE_URL), gemini
(GOOGLE_GEMINI_BASE_URL) or responses (Codex: the -c ...base_url= argument,
else the base_url of $CODEX_HOME/config.toml)."""
import sys
# Said on stderr at once and again before the request, as a CLI shows it is
# working: the quiet that follows is the request's.
sys.stderr.write("starting\n")
sys.stderr.flush()
import json, os, re, time, urllib.request

api = os.environ["HOLDING_API"]
prompt = "Create mock_out.txt. MOCK_TOOL"
if api == "anthropic":
    url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
    body = {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 100,
            "messages": [{"role": "user", "content": prompt}], "tools": [{"name": "Bash", "input_schema": {}}]}
elif api == "gemini":
    url = os.environ["GOOGLE_GEMINI_BASE_URL"] + "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    body = {"contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}
else:
    base = None
    for a in sys.argv:
        m = re.match(r'model_providers\.\w+\.base_url="(.*)"$', a)
        if m:
            base = m.group(1)
    if base is None:
        cfg = open(os.path.join(os.environ["CODEX_HOME"], "config.toml")).read()
        base = re.search(r'base_url\s*=\s*"([^"]*)"', cfg).group(1)
    url = base + "/responses"
    body = {"model": "gpt-5.5", "stream": True, "input": prompt, "tools": [{"type": "function", "name": "shell"}]}

sys.stderr.write("asking the model\n")
sys.stderr.flush()
req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
with urllib.request.urlopen(req) as resp:
    resp.read()
open("replied", "w").close()
sys.stdin.close()
while True:
    time.sleep(1)
