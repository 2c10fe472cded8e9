#!/usr/bin/env bash
# Runs the demo in a fresh copy, so it can be run again and again:
# two tasks, one run, the embedded SQLite store.
#   fix-trailing-commas  OPTIMAL → WARNING (degrades) → DONE
#   runaway              OPTIMAL → WARNING → HARD, cut off mid-call → BLOCKED
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# The binary lives in a cache folder, not in each copy: go build relinks it
# only when the sources changed, and each copy stays a few kilobytes.
bin="${XDG_CACHE_HOME:-$HOME/.cache}/purser-demo"
mkdir -p "$bin"
(cd "$root" && go build -o "$bin/purser" ./cmd/purser)
work="$(mktemp -d "${TMPDIR:-/tmp}/purser-demo.XXXXXX")"
# The copy and its database (in the copy, beside the workspaces, not in the
# state directory where nothing would remove it) go when the demo ends,
# unless PURSER_DEMO_KEEP=1 asks to keep them to look at.
cleanup() {
  if [ "${PURSER_DEMO_KEEP:-}" = 1 ]; then
    echo "demo: files kept in $work (PURSER_DEMO_KEEP=1; remove them with rm -rf $work)"
  else
    cd / && rm -rf "$work"
  fi
}
trap cleanup EXIT
cp -R "$here/." "$work/"
rm -f "$work/run.sh"
cd "$work"
export PATH="$bin:$PATH"
export PURSER_DB="$work/purser.db"
# The boxes' HOMEs (and anything else of Purser's state) stay in the copy too.
export XDG_STATE_HOME="$work/.state"

# The validators run in a box by default (the sim agent runs inside Purser,
# not boxable). Where no box can be made here, the demo says so and runs
# unboxed, knowingly: sandbox: off in its copy of purser.yaml, and only then.
if why="$(purser check fix-trailing-commas.yaml runaway.yaml 2>&1 >/dev/null)"; then
  echo "== sandbox: on (by default): the validators run in a box; the sim agent runs inside Purser"
elif grep -q "no box can be made here" <<<"$why"; then
  echo "== sandbox: OFF: no box can be made on this machine, so this demo runs UNBOXED, knowingly:"
  sed -n '1s/^/   /p' <<<"$why"
  printf '\n# Written by run.sh: no box can be made on this machine (see its output).\nsandbox: off\n' >> purser.yaml
else
  echo "$why" >&2
  exit 1
fi

echo "== purser run (in $work)"
set +e
purser run fix-trailing-commas.yaml runaway.yaml
code=$?
set -e
echo "== exit code $code (3: a task was BLOCKED by its budget, as this demo intends)"
echo
echo "== purser status"
purser status
echo
echo "== runaway/STATUS.md"
cat runaway/STATUS.md
echo
echo "== fix-trailing-commas/BUDGET.md"
cat parser/BUDGET.md
[ "$code" -eq 3 ] || { echo "demo: expected exit code 3, got $code" >&2; exit 1; }
echo
echo "demo: as intended (the binary is $bin/purser; PURSER_DEMO_KEEP=1 keeps the files, $(du -sh "$work" | cut -f1))"
