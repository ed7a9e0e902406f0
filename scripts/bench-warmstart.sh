#!/bin/sh
# Warm-start load time with 100,000 run-history rows against an empty-database baseline.
# Not part of the test suite. Usage: scripts/bench-warmstart.sh [rows] [dir]
set -eu
cd "$(dirname "$0")/.."
exec cargo bench --quiet --bench warmstart -- "$@"
