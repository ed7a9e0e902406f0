#!/usr/bin/env bash
# How far one host goes: N concurrent fake agents (the scripted fake, one assistant event a
# second with tokens on every event) over a 20,000-issue file backlog, for N = 100, 300, 1000,
# each held 60 s, one fresh daemon per N. Reports per N: the daemon's peak RSS and threads, its
# CPU (cores, and microseconds per agent event), the tracker poll's mean duration, the p99 of
# the orchestrator's dispatch pass (sortie_dispatch_pass_duration_seconds) and of the database
# writer's commands (sortie_store_command_duration_seconds) since start, gzip
# /api/v1/state p50/p99 under 8 readers, the time until 50 event streams all had a change
# after a refresh, the WAL's peak size, events lost (stored event counts that differ or skip,
# plus shed events), whether every run's token totals are exact, and the SIGTERM-to-exit time
# with N agents running. The last N is checked against the targets; exits 1 when one is missed.
#
#   scripts/bench-scale.sh                       # release build, N = 100,300,1000, 60 s
#   BENCH_N=100 BENCH_HOLD=20 scripts/bench-scale.sh
#   BENCH_PROFILE=debug scripts/bench-scale.sh
#
# Needs python3. Raises the open-files limit to its hard limit (each agent holds three pipes).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${BENCH_PROFILE:-release}"
NS="${BENCH_N:-100,300,1000}"
HOLD="${BENCH_HOLD:-60}"
ISSUES="${BENCH_ISSUES:-20000}"

if [ "$PROFILE" = release ]; then
  cargo build --release --bin sortie --bin fake-agent >/dev/null
else
  cargo build --bin sortie --bin fake-agent >/dev/null
fi
BIN="$PWD/target/$PROFILE"
ulimit -n "$(ulimit -Hn)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "bench-scale: N=$NS, hold ${HOLD}s, $ISSUES issues, $(nproc) cores, open files $(ulimit -n)" >&2
python3 scripts/lib/bench_scale.py "$BIN/sortie" "$BIN/fake-agent" "$NS" "$ISSUES" "$HOLD" "$WORK"
