#!/usr/bin/env bash
# Agent stream ingest (100k stream-json lines, usage on every assistant message) through the
# real pipeline, as a ratio to a bare per-line serde_json parse of the same file.
# Usage: scripts/bench-ingest.sh [LINES] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export BENCH_DIR="$dir" FAKE_AGENT_SCENARIO="$dir/scenario.jsonl"
BENCH_LINES="${1:-100000}" BENCH_ROUNDS="${2:-3}" cargo bench --bench ingest --quiet
