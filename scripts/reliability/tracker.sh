#!/usr/bin/env bash
# Daemon memory under a hostile tracker: the release binary polls a local GitHub-shaped server
# (scripts/reliability/hostile_tracker.py) whose issue list is 40 pages chained by `Link`, and
# the daemon's peak resident memory (VmHWM of the sortie process) is read after several polls.
#   1. 40 pages of 15 MiB, each announced by Content-Length;
#   2. the same pages sent chunked (the size is learnt only by reading);
#   3. 40 pages of 4 MiB of issues with 256 KiB bodies, each under the one-answer cap, so the
#      poll's total cap (tracker.max_poll_bytes, 64 MiB by default) is what stops the read;
#   4. the same with ordinary issues of a few KiB and many fields, whose parsed JSON costs
#      several times its text (each page is turned into issues before the next is read).
# Each scenario also checks that the poll failed with an error naming the cap it met.
# Usage: scripts/reliability/tracker.sh [path/to/sortie]   (default target/release/sortie)
# Prints `name: value (target …) ok|FAIL` per figure; exits 1 when a figure misses its target.
set -euo pipefail
cd "$(dirname "$0")/../.."

SORTIE=${1:-target/release/sortie}
if [ ! -x "$SORTIE" ]; then
  echo "no sortie binary at $SORTIE (build it: cargo build --release)" >&2
  exit 2
fi
SORTIE=$(realpath "$SORTIE")
HOSTILE=$(realpath scripts/reliability/hostile_tracker.py)
TARGET_MIB=100

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits until command $2 succeeds, at most $1 seconds.
wait_until() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

listening() { python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),timeout=1)" 2>/dev/null; }
served_at_least() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }
kib_field() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }

FAILED=0
report() { # name value target-text ok(0/1)
  local verdict=ok
  [ "$4" -eq 1 ] || { verdict=FAIL; FAILED=1; }
  echo "$1: $2 (target $3) $verdict"
}

# scenario name, mode, page MiB, requests to wait for, page style
run() {
  local name=$1 mode=$2 mib=$3 want=$4 style=$5
  local dir="$WORK/$name" hport port pid hpid
  mkdir -p "$dir"
  hport=$(free_port)
  python3 "$HOSTILE" "$hport" "$mode" 40 "$mib" "$dir/served" "$style" &
  hpid=$!
  PIDS+=("$hpid")
  wait_until 30 listening "$hport" || { echo "$name: hostile server did not start" >&2; exit 1; }
  port=$(free_port)
  cat >"$dir/WORKFLOW.md" <<EOF
---
tracker:
  kind: github
  endpoint: http://127.0.0.1:$hport
  api_key: hostile-tracker-token
  project: owner/repo
  active_states: [to do]
  terminal_states: [done]
github:
  retry_base_ms: 10
  timeout_ms: 60000
polling:
  interval_ms: 1000
workspace:
  root: ./ws
agent:
  kind: mock
server:
  port: $port
---
Work on {{ .issue.identifier }}.
EOF
  ( cd "$dir" && SORTIE_PRICE_TABLE_FETCH=off exec "$SORTIE" WORKFLOW.md >"$dir/sortie.log" 2>&1 ) &
  pid=$!
  PIDS+=("$pid")
  wait_until 30 listening "$port" || { echo "$name: sortie did not start" >&2; cat "$dir/sortie.log" >&2; exit 1; }
  local idle
  idle=$(kib_field "$pid" VmRSS)
  if ! wait_until 120 served_at_least "$dir/served" "$want"; then
    echo "$name: the daemon asked for fewer than $want pages in 120 s" >&2
    tail -5 "$dir/sortie.log" >&2
  fi
  sleep 1
  local peak served named
  peak=$(kib_field "$pid" VmHWM)
  served=$(wc -l <"$dir/served")
  named=$(grep -c 'tracker.max_poll_bytes' "$dir/sortie.log" || true)
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  kill -TERM "$hpid" 2>/dev/null || true
  wait "$hpid" 2>/dev/null || true
  local peak_mib=$((peak / 1024))
  report "$name.peak_rss_mib" "$peak_mib" "<= $TARGET_MIB; $((idle / 1024)) at start, $served pages asked" \
    "$([ "$peak_mib" -le "$TARGET_MIB" ] && echo 1 || echo 0)"
  report "$name.errors_naming_the_cap" "$named" ">= 1 log line naming tracker.max_poll_bytes" \
    "$([ "$named" -ge 1 ] && echo 1 || echo 0)"
}

run hostile_15mib_pages length 15 5 big
run hostile_15mib_pages_chunked chunked 15 5 big
run hostile_4mib_pages length 4 48 big
run hostile_4mib_pages_small_issues length 4 48 small

exit "$FAILED"
