#!/usr/bin/env bash
# Measures GET /api/v1/state (throughput, p50, p99, body size) while 50 fake agents run and
# 500 retries are queued, against GET /livez on the same server in the same run (a trivial
# handler: same listener, pool and sockets, no document), and prints the ratios. Each round
# loads /api/v1/state as a plain client asks for it (identity encoding), as a browser asks for
# it (`Accept-Encoding: gzip`), and with the `If-None-Match` of the last answer (a revalidating
# client), each window between two /livez windows; a ratio is taken against the mean of the
# /livez windows either side of it. The summary gives the minimum and the median of the ratios
# over the rounds, and the ratio of all rounds' requests together (five rounds by default: on
# a small shared host one 5 s window can differ from the next by a sixth, with or without a
# body to send). Not part of the test suite.
#
#   scripts/bench-state.sh                 # release build, 5 rounds of 5 s per route
#   BENCH_PROFILE=debug scripts/bench-state.sh
#   BENCH_SECONDS=10 BENCH_CLIENTS=8 BENCH_ROUNDS=5 scripts/bench-state.sh
#
# The load generator is wrk (Debian: `apt-get install -y wrk`): a fixed number of keep-alive
# connections (bounded load) on 127.0.0.1, latency percentiles from its own histogram.
# python3 seeds the retry queue (sqlite3 module) and reads wrk's output.
set -euo pipefail

cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "bench: wrk not found (apt-get install -y wrk)" >&2; exit 1; }
PROFILE="${BENCH_PROFILE:-release}"
SECONDS_PER_ROUTE="${BENCH_SECONDS:-5}"
CLIENTS="${BENCH_CLIENTS:-8}"
ROUNDS="${BENCH_ROUNDS:-5}"
RUNNING=50
RETRIES=500

if [ "$PROFILE" = release ]; then
  cargo build --release --bins >/dev/null
  BIN=target/release
else
  cargo build --bins >/dev/null
  BIN=target/debug
fi
SORTIE="$PWD/$BIN/sortie"
FAKE="$PWD/$BIN/fake-agent"

DIR="$(mktemp -d)"
PID=""
BARE_PIDS=""
cleanup() {
  for p in $BARE_PIDS; do pkill -TERM -P "$p" 2>/dev/null || true; kill -TERM "$p" 2>/dev/null || true; done
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}
trap cleanup EXIT

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

cat >"$DIR/WORKFLOW.md" <<EOF
---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done]
file:
  path: ./issues.json
polling:
  interval_ms: 600000
workspace:
  root: ./ws
agent:
  kind: claude-code
  command: $FAKE
  env: [FAKE_AGENT_*]
  max_turns: 1
  max_concurrent_agents: $RUNNING
  max_retry_backoff_ms: 86400000
claude-code:
  permission_mode: acceptEdits
---
Work on {{ .issue.identifier }}.
EOF
printf '{"init": {}}\n{"hang": true}\n' >"$DIR/scenario.jsonl"

wait_for() { # url
  for _ in $(seq 1 400); do
    if curl -fsS "$1" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  echo "bench: $1 did not answer" >&2
  exit 1
}

# 1. Create the database (migrations) with an empty backlog, then stop.
echo '[]' >"$DIR/issues.json"
(cd "$DIR" && exec env FAKE_AGENT_SCENARIO="$DIR/scenario.jsonl" "$SORTIE" --port "$PORT" WORKFLOW.md 2>"$DIR/first.log") &
PID=$!
wait_for "http://127.0.0.1:$PORT/livez"
kill -TERM "$PID"; wait "$PID" || true; PID=""

# 2. Seed the retry queue (due tomorrow) and write the backlog.
python3 - "$DIR" "$RUNNING" "$RETRIES" <<'EOF'
import json, sqlite3, sys, time
d, running, retries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
issues = []
for i in range(running + retries):
    issues.append({"id": str(10000 + i), "identifier": f"B-{i}", "title": f"Bench issue {i}",
                   "state": "To Do", "priority": 1, "labels": ["bench"], "issue_type": "Task",
                   "url": f"https://tracker.example/B-{i}",
                   "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"})
json.dump(issues, open(f"{d}/issues.json", "w"))
db = sqlite3.connect(f"{d}/.sortie.db")
due = int(time.time() * 1000) + 86_400_000
for i in range(running, running + retries):
    db.execute("INSERT INTO retry_entries (issue_id, identifier, attempt, due_at_ms, error, issue_title, issue_state, retry_trigger, dispatched_at_ms) VALUES (?,?,?,?,?,?,?,?,?)",
               (str(10000 + i), f"B-{i}", 2, due, "agent exited with code 1", f"Bench issue {i}", "To Do", "error", due - 86_500_000))
db.commit()
EOF

# 3. Start for real and wait for the shape.
(cd "$DIR" && exec env FAKE_AGENT_SCENARIO="$DIR/scenario.jsonl" "$SORTIE" --port "$PORT" --log-level warn WORKFLOW.md 2>"$DIR/run.log") &
PID=$!
wait_for "http://127.0.0.1:$PORT/livez"
for _ in $(seq 1 600); do
  counts="$(curl -fsS "http://127.0.0.1:$PORT/api/v1/state" | python3 -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print(c["running"], c["retrying"])')"
  [ "$counts" = "$RUNNING $RETRIES" ] && break
  sleep 0.1
done
echo "state: running/retrying = $counts"
[ "$counts" = "$RUNNING $RETRIES" ] || { echo "bench: never reached $RUNNING running / $RETRIES retrying" >&2; exit 1; }
URL="http://127.0.0.1:$PORT"
SIZE="$(curl -fsS "$URL/api/v1/state" | wc -c)"
ETAG="$(curl -fsS -o /dev/null -D - "$URL/api/v1/state" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')"
GZSIZE="$(curl -fsS -H 'Accept-Encoding: gzip' "$URL/api/v1/state" | wc -c)"
echo "state document: $SIZE bytes ($GZSIZE gzip), ETag $ETAG"

# The floor for the same bytes: a bare server (benches/bare_http.rs) answering every request
# with the identity document, and one with its gzip encoding, in one write each.
curl -fsS "$URL/api/v1/state" -o "$DIR/state.json"
curl -fsS -H 'Accept-Encoding: gzip' "$URL/api/v1/state" -o "$DIR/state.json.gz"
cargo bench --bench bare_http --no-run --quiet 2>/dev/null
BARE_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
BARE_GZ_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cargo bench --bench bare_http --quiet -- "$BARE_PORT" "$DIR/state.json" >/dev/null 2>&1 &
BARE_PIDS="$!"
cargo bench --bench bare_http --quiet -- "$BARE_GZ_PORT" "$DIR/state.json.gz" gzip >/dev/null 2>&1 &
BARE_PIDS="$BARE_PIDS $!"
wait_for "http://127.0.0.1:$BARE_PORT/"
wait_for "http://127.0.0.1:$BARE_GZ_PORT/"

# 4. Load: wrk with CLIENTS keep-alive connections per route, ROUNDS rounds.
THREADS=$((CLIENTS < 2 ? CLIENTS : 2))
run_wrk() { # label path [header] [base-url]
  local out
  local args=(-t"$THREADS" -c"$CLIENTS" -d"${SECONDS_PER_ROUTE}s" --latency)
  if [ -n "${3:-}" ]; then args+=(-H "$3"); fi
  out="$(wrk "${args[@]}" "${4:-$URL}$2")"
  if grep -q "Non-2xx or 3xx responses" <<<"$out"; then
    echo "bench: $2 answered errors:" >&2
    echo "$out" >&2
    exit 1
  fi
  printf '%s\n' "== $1" "$out" >>"$DIR/wrk.txt"
}
for round in $(seq 1 "$ROUNDS"); do
  # Every state window sits between two /livez windows, and its ratio is taken against their
  # mean: the host's capacity drifts from one window to the next, and a base measured next to
  # the window on both sides cancels a steady drift instead of charging it to the route.
  run_wrk "livez $round" /livez
  run_wrk "state $round" /api/v1/state
  run_wrk "livez $round" /livez
  run_wrk "state-gzip $round" /api/v1/state "Accept-Encoding: gzip"
  run_wrk "livez $round" /livez
  # The tag of the document now (a session's late start event may have changed it since).
  ETAG="$(curl -fsS -o /dev/null -D - "$URL/api/v1/state" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')"
  run_wrk "state-304 $round" /api/v1/state "If-None-Match: $ETAG"
  run_wrk "livez $round" /livez
  run_wrk "bare $round" / "" "http://127.0.0.1:$BARE_PORT"
  run_wrk "bare-gzip $round" / "" "http://127.0.0.1:$BARE_GZ_PORT"
done

python3 - "$DIR/wrk.txt" "$ROUNDS" <<'EOF'
import re, statistics, sys
text, rounds = open(sys.argv[1]).read(), int(sys.argv[2])
UNIT = {"us": 0.001, "ms": 1.0, "s": 1000.0}
PATHS = {"livez": "/livez", "state": "/api/v1/state", "state-gzip": "/api/v1/state (gzip)",
         "state-304": "/api/v1/state (304)", "bare": "bare write (identity)",
         "bare-gzip": "bare write (gzip)"}

def ms(v):
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", v)
    return float(m.group(1)) * UNIT[m.group(2)]

# Windows in the order they ran: [kind, round, req/s, p50, p99, base].
windows = []
for block in text.split("== ")[1:]:
    label, body = block.split("\n", 1)
    kind, rnd = label.split()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", body).group(1))
    p50 = ms(re.search(r"\s50%\s+(\S+)", body).group(1))
    p99 = ms(re.search(r"\s99%\s+(\S+)", body).group(1))
    windows.append([kind, int(rnd), rps, p50, p99, None])
# A state window's base: the mean of the /livez windows right before and right after it.
for i, w in enumerate(windows):
    if w[0].startswith("state"):
        before = next(v[2] for v in reversed(windows[:i]) if v[0] == "livez")
        after = next(v[2] for v in windows[i + 1:] if v[0] == "livez")
        w[5] = (before + after) / 2

print(f"{'route':<22}{'round':>6}{'req/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'ratio':>8}")
for kind, rnd, rps, p50, p99, base in windows:
    ratio = f"{rps / base:>8.3f}" if base else ""
    print(f"{PATHS[kind]:<22}{rnd:>6}{rps:>11.0f}{p50:>9.2f}{p99:>9.2f}{ratio}")
runs = {}
for w in windows:
    runs.setdefault(w[0], []).append(w)
for kind, rows in runs.items():
    if not kind.startswith("state"):
        continue
    ratios = [r[2] / r[5] for r in rows]
    overall = sum(r[2] for r in rows) / sum(r[5] for r in rows)
    p99s = [r[4] for r in rows]
    print(f"{PATHS[kind]}: throughput ratio to /livez (the windows either side) min "
          f"{min(ratios):.3f} median {statistics.median(ratios):.3f} all rounds {overall:.3f}; "
          f"p99 min {min(p99s):.2f} ms median {statistics.median(p99s):.2f} ms")
for kind, floor in (("state", "bare"), ("state-gzip", "bare-gzip")):
    ratios = [runs[kind][i][2] / runs[floor][i][2] for i in range(rounds)]
    print(f"{PATHS[kind]}: throughput ratio to a {PATHS[floor]} of the same bytes "
          f"min {min(ratios):.3f} median {statistics.median(ratios):.3f}")
EOF
