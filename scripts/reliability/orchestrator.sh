#!/usr/bin/env bash
# The orchestrator's reliability figures against the release binary (issue: a hung tracker,
# refresh and webhook floods): runs the `#[ignore]`d probes of tests/reliability_probe.rs with
# SORTIE_BIN pointing at the binary, prints each figure beside its target, and exits 1 when a
# target is missed. Not part of the test suite.
#
#   scripts/reliability/orchestrator.sh [path/to/sortie]   # default: target/release/sortie
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-target/release/sortie}"
if [ "$bin" = target/release/sortie ]; then
  cargo build --release --bin sortie >/dev/null
fi
bin="$(realpath "$bin")"
cargo build --bins >/dev/null # the fake agent the probes run

figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
if ! log=$(SORTIE_BIN="$bin" RELIABILITY_FIGURES="$figures" \
    cargo test -q --test reliability_probe -- --ignored --test-threads=1 2>&1); then
  echo "$log" >&2
  echo "reliability probes failed to run" >&2
  exit 1
fi
out=$(cat "$figures")

# name  comparison  target  unit  what
targets='
stall_stop_after_last_event_ms <= 3000 ms a silent agent (stall limit 2 s) is stopped while the tracker hangs
livez_p99_ms <= 50 ms /livez p99 while the tracker hangs
state_not_answered == 0 count /api/v1/state requests not answered 200 while the tracker hangs
ten_refreshes_max_ms <= 1000 ms slowest of 10 concurrent refreshes while the tracker hangs
sigterm_to_exit_ms <= 15000 ms SIGTERM to exit, tracker hung, agent ignoring SIGTERM
agents_left == 0 count agent processes left after that exit
runs_recorded >= 1 count runs recorded by that shutdown
refresh_flood_polls <= 11 count polls made by 10 s of refreshes
webhook_flood_polls <= 11 count polls made by 10 s of signed deliveries at 10/s
'
fail=0
while read -r name op target unit what; do
  [ -n "$name" ] || continue
  value=$(echo "$out" | awk -v n="$name" '$1 == "figure" && $2 == n { print $3 }' | tail -n 1)
  if [ -z "$value" ]; then
    printf '%-32s %12s  (target %s %s %s)  MISSING  %s\n' "$name" "-" "$op" "$target" "$unit" "$what"
    fail=1
    continue
  fi
  if awk -v v="$value" -v t="$target" -v op="$op" 'BEGIN {
      ok = (op == "<=" && v <= t) || (op == ">=" && v >= t) || (op == "==" && v == t); exit !ok }'; then
    verdict=ok
  else
    verdict=FAIL
    fail=1
  fi
  printf '%-32s %12s  (target %s %s %s)  %-4s  %s\n' "$name" "$value" "$op" "$target" "$unit" "$verdict" "$what"
done <<< "$targets"
echo "$out" | awk '$1 == "figure" && ($2 == "refreshes_sent" || $2 == "webhooks_accepted" || $2 == "livez_p50_ms" || $2 == "exit_code") { printf "%-32s %12s  (context)\n", $2, $3 }'
exit "$fail"
