#!/usr/bin/python3
"""A stand-in agent CLI that shows what credentials it holds: it writes its
whole environment to ./env.json in its working directory (the workspace),
then sends one model request to the base URL its backend gave it, with the
key it finds under KEY_CLI_VAR in the protocol's place, and a second one
with a key of its own guessing; the two statuses go to ./status.json.

KEY_CLI_API names the dialect: anthropic (ANTHROPIC_BASE_URL; x-api-key,
or Authorization: Bearer for ANTHROPIC_AUTH_TOKEN and
CLAUDE_CODE_OAUTH_TOKEN), gemini (GOOGLE_GEMINI_BASE_URL, x-goog-api-key)
or responses (Codex: the -c ...base_url= argument, Authorization: Bearer)."""
import json, os, re, sys, urllib.error, urllib.request

json.dump(dict(os.environ), open("env.json", "w"))
api = os.environ["KEY_CLI_API"]
var = os.environ.get("KEY_CLI_VAR", "")
key = os.environ.get(var, "")
if api == "anthropic":
    url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    place = lambda k: {"authorization": "Bearer " + k} if var in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN") else {"x-api-key": k}
elif api == "gemini":
    url = os.environ["GOOGLE_GEMINI_BASE_URL"] + "/v1beta/models/gemini-2.5-pro:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    place = lambda k: {"x-goog-api-key": k}
else:
    base = next(m.group(1) for a in sys.argv for m in [re.match(r'model_providers\.\w+\.base_url="(.*)"$', a)] if m)
    url = base + "/responses"
    body = {"model": "gpt-5.5", "input": "hi"}
    place = lambda k: {"authorization": "Bearer " + k}

def ask(k):
    h = {"content-type": "application/json"}
    h.update(place(k))
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=h)
    try:
        with urllib.request.urlopen(req) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code

json.dump({"own": ask(key), "guessed": ask("sk-guessed-key")}, open("status.json", "w"))
