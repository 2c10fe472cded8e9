#!/usr/bin/env bash
# probe.sh AGENT BIN_DIR MOCK_URL [PROMPT]: runs one agent (opencode | qwen |
# cline) once, straight against the fake LLM server (no Purser), in a fresh
# HOME and workspace under a temp dir, with the clean environment docs/agents.md
# gives, and prints the requests the mock answered plus every non-loopback
# connect/DNS attempt (strace, when installed). It is how docs/agents.md's
# findings were made; run it as any user (e.g. runuser -u tester -- ...).
set -euo pipefail
agent=$1 bin=$2 url=$3
prompt=${4:-"Create mock_out.txt. MOCK_TOOL"}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agent-probe.XXXXXX")
mkdir -p "$tmp/home" "$tmp/ws"
curl -fsS -X POST "$url/_mock/reset" >/dev/null
base=(env -i PATH="$bin:/usr/local/bin:/usr/bin:/bin" HOME="$tmp/home" TMPDIR="$tmp")
case $agent in
opencode)
  cmd=("${base[@]}" ANTHROPIC_API_KEY=test ANTHROPIC_BASE_URL="$url"
    OPENCODE_PURE=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_SHARE=1
    OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_PROJECT_CONFIG=1
    OPENCODE_DISABLE_CLAUDE_CODE=1 npm_config_offline=true
    OPENCODE_CONFIG_CONTENT='{"autoupdate":false,"share":"disabled","model":"anthropic/claude-sonnet-4-5","provider":{"anthropic":{"options":{"baseURL":"{env:ANTHROPIC_BASE_URL}/v1"}}},"permission":{"*":"allow"}}'
    opencode run "$prompt") ;;
qwen)
  # System settings outrank the user's and the repository's .qwen/settings.json.
  printf '%s\n' '{"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true}}' >"$tmp/qwen-settings.json"
  cmd=("${base[@]}" OPENAI_API_KEY=test OPENAI_BASE_URL="$url/v1" QWEN_CODE_SYSTEM_SETTINGS_PATH="$tmp/qwen-settings.json"
    qwen --auth-type openai -m gpt-5.5 --yolo "$prompt") ;;
cline)
  cmd=("${base[@]}" OPENAI_API_KEY=test OPENAI_BASE_URL="$url/v1" DO_NOT_TRACK=1
    sh -c 'cline auth -p openai -k "$OPENAI_API_KEY" -b "$OPENAI_BASE_URL" -m gpt-5.5 --data-dir "$HOME/.cline-data" >/dev/null &&
      exec cline --data-dir "$HOME/.cline-data" "$1"' sh "$prompt") ;;
*) echo "unknown agent $agent" >&2; exit 2 ;;
esac
cd "$tmp/ws"
rc=0
if command -v strace >/dev/null; then
  timeout -k 5 "${PROBE_TIMEOUT:-120}" strace -f -qq -e trace=connect,sendmmsg,sendto -s 80 -o "$tmp/strace" "${cmd[@]}" </dev/null >"$tmp/out" 2>&1 || rc=$?
else
  timeout -k 5 "${PROBE_TIMEOUT:-120}" "${cmd[@]}" </dev/null >"$tmp/out" 2>&1 || rc=$?
fi
echo "== $agent as $(id -un): exit $rc; workspace: $(ls -A "$tmp/ws" | tr '\n' ' ')"
tail -n 5 "$tmp/out"
echo "== requests the mock answered"
curl -fsS "$url/_mock/log" | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    if r["path"].startswith("/_mock"): continue
    s = r.get("summary") or {}
    print(r["method"], r["path"], r.get("did"), "model=%s tools=%d tool_result=%s stream_options=%s max_tokens=%s" % (
        s.get("model"), len(s.get("tools") or []), s.get("has_tool_result"), s.get("stream_options"), s.get("max_tokens")))'
if [ -f "$tmp/strace" ]; then
  echo "== network other than the mock (connect to non-loopback, DNS names asked)"
  grep -v 'AF_UNIX\|AF_NETLINK' "$tmp/strace" | grep -o 'sin_addr=inet_addr("[0-9.]*")' | grep -v '127.0.0.1' | sort | uniq -c || true
  grep -o 'iov_base="[^"]*"' "$tmp/strace" | grep -ao '\\[0-9]*[a-z][a-z0-9-]*\\[0-9]*[a-z][a-z0-9.\\-]*' | sort -u || true
fi
echo "== processes left behind"
ps -eo pid,ppid,cmd | grep -F "$tmp" | grep -v grep || echo none
echo "(files kept in $tmp)"
