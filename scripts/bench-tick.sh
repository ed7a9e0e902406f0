#!/usr/bin/env bash
# Tick time over a 10,000-issue file-tracker backlog as a ratio to parsing that file.
# Usage: scripts/bench-tick.sh [ISSUES]
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_ISSUES="${1:-10000}" cargo bench --bench tick --quiet
