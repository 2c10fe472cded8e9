#!/usr/bin/env bash
# The GitHub Action's step (action.yml): runs purser on the tasks the action
# was given and reports to GitHub through `purser run --ci github` (the table
# appended to $GITHUB_STEP_SUMMARY, ::warning and ::error annotations). Its
# exit code is purser's, so the step fails when a task is BLOCKED (3) or
# FAILED (1); the code is also the step's output exit-code.
#
# Inputs come from the environment (never interpolated into this script, so
# a task path cannot inject shell): INPUT_TASKS (required), INPUT_RUN_BUDGET,
# INPUT_PARALLEL, INPUT_DATABASE; PURSER names the binary (default: purser
# on the PATH).
set -uo pipefail

purser=${PURSER:-purser}
if [ -z "${INPUT_TASKS:-}" ]; then
  echo "::error title=Purser::the action's tasks input is empty: name at least one task file"
  exit 2
fi
# A write token where the agent works is one the agent can take: actions/
# checkout leaves the job's GITHUB_TOKEN in .git/config unless told
# persist-credentials: false. Refuse to start the agent beside one (issue 20
# item 7): push from a later step or job, outside the box.
if git rev-parse --git-dir >/dev/null 2>&1; then
  if git config --local --get-regexp '^http\..*extraheader$' >/dev/null 2>&1 ||
    git config --local --get-regexp '^remote\..*\.url$' 2>/dev/null | grep -q '://[^/@]*:[^/@]*@'; then
    echo "::error title=Purser::the repository's .git/config holds a credential (an http extraheader or a URL with a password), where the agent would work and could take it; check out with persist-credentials: false and push from a step after the agent"
    exit 2
  fi
fi

# One task file per word (spaces or newlines).
read -r -d '' -a tasks <<<"$INPUT_TASKS" || true

args=(run --ci github --parallel "${INPUT_PARALLEL:-1}")
if [ -n "${INPUT_RUN_BUDGET:-}" ]; then
  args+=(--run-budget "$INPUT_RUN_BUDGET")
fi
# The database lives outside every workspace: by default in the runner's
# temporary directory, so an agent cannot rewrite the ledger that caps it.
db=${INPUT_DATABASE:-}
if [ -z "$db" ]; then
  db="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/purser/purser.db"
  mkdir -p "$(dirname "$db")"
fi
args+=(--db "$db")

"$purser" "${args[@]}" -- "${tasks[@]}"
code=$?
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "exit-code=$code" >>"$GITHUB_OUTPUT"
fi
exit "$code"
