#!/usr/bin/env bash
# Poll-tick time over a 10,000-issue file-tracker backlog as a ratio to a bare
# serde_json::from_slice::<serde_json::Value> of the same file, without and with blockers; prints
# each run's figures and the min and median ratio of three runs (target: <= 1.5 after a change).
# Not part of the test suite. Usage: scripts/bench-tick.sh [ISSUES]
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_ISSUES="${1:-10000}" cargo bench --bench tick --quiet
