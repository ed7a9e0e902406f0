#!/usr/bin/env bash
# The fake-agent daemon suite with every session under `worker.sandbox: bubblewrap`: the test
# harness (tests/common/sandbox_mode.rs) rewrites each workflow it starts a daemon with, binding
# the paths the test hands the fake agent outside its workspace with `read_write`. Needs `bwrap`
# (Debian: bubblewrap) and unprivileged user namespaces. Extra arguments go to nextest (or cargo
# test), e.g. `scripts/test-sandboxed.sh -E 'test(stall)'`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v bwrap >/dev/null || { echo "bwrap not found: apt-get install bubblewrap" >&2; exit 2; }
# The binaries whose tests start the real daemon with the fake agent (claude-code, codex,
# copilot, opencode, ACP and kiro modes).
TESTS=(
  agent_acp agent_auth_holds agent_codex_daemon agent_copilot_daemon agent_failure_breaker
  agent_kiro agent_opencode_daemon agent_usage_limits
  daemon_agents daemon_dispatch daemon_restart daemon_shutdown
  handoff_evidence
  reactions_ci reactions_ci_jira reactions_conflict_labels reactions_gitea reactions_gitlab
  reactions_merge reactions_review reactions_triage
)
args=()
for t in "${TESTS[@]}"; do args+=(--test "$t"); done
export SORTIE_TEST_SANDBOX=bubblewrap
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run "${args[@]}" --no-fail-fast "$@"
else
  cargo test "${args[@]}" --no-fail-fast "$@"
fi
