#!/bin/sh
# Warm-start load time with 100,000 run-history rows against an empty-database baseline, then
# the time from open to the end of the first tick with 1,000 overdue retries over a 10,000-issue
# file tracker against the same start without retries (target: under 1 s).
# Not part of the test suite. Usage: scripts/bench-warmstart.sh [rows] [dir]
set -eu
cd "$(dirname "$0")/.."
exec cargo bench --quiet --bench warmstart -- "$@"
