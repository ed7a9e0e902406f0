#!/usr/bin/env bash
# Measures GET /api/v1/state (throughput, p50, p99) while 50 fake agents run and 500 retries
# are queued, against GET /livez on the same server in the same run (a trivial tiny_http
# handler: same listener, pool and sockets, no document), and prints the ratios.
# Not part of the test suite.
#
#   scripts/bench-state.sh                 # release build
#   BENCH_PROFILE=debug scripts/bench-state.sh
#   BENCH_SECONDS=10 BENCH_CLIENTS=8 scripts/bench-state.sh
#
# Needs python3 (load generator, sqlite3 module for seeding the retry queue).
set -euo pipefail

cd "$(dirname "$0")/.."
PROFILE="${BENCH_PROFILE:-release}"
SECONDS_PER_ROUTE="${BENCH_SECONDS:-5}"
CLIENTS="${BENCH_CLIENTS:-8}"
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
cleanup() {
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
  max_turns: 1
  max_concurrent_agents: $RUNNING
  max_retry_backoff_ms: 86400000
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
SIZE="$(curl -fsS "http://127.0.0.1:$PORT/api/v1/state" | wc -c)"
echo "state document: $SIZE bytes"

# 4. Load: keep-alive clients, each timing its own requests.
python3 - "$PORT" "$SECONDS_PER_ROUTE" "$CLIENTS" <<'EOF'
import http.client, sys, threading, time
port, seconds, clients = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])

def load(path):
    lat, lock = [], threading.Lock()
    stop = time.monotonic() + seconds
    def worker():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        while time.monotonic() < stop:
            t = time.perf_counter()
            c.request("GET", path)
            r = c.getresponse(); r.read()
            if r.status != 200:
                raise SystemExit(f"{path}: HTTP {r.status}")
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)
    ts = [threading.Thread(target=worker) for _ in range(clients)]
    start = time.monotonic()
    for t in ts: t.start()
    for t in ts: t.join()
    took = time.monotonic() - start
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    return len(lat) / took, pct(0.5), pct(0.99)

base = load("/livez")
state = load("/api/v1/state")
print(f"{'route':<16}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
print(f"{'/livez':<16}{base[0]:>10.1f}{base[1]:>10.2f}{base[2]:>10.2f}")
print(f"{'/api/v1/state':<16}{state[0]:>10.1f}{state[1]:>10.2f}{state[2]:>10.2f}")
print(f"ratio (state / trivial): throughput {state[0] / base[0]:.3f}, p99 {state[2] / base[2]:.1f}x")
EOF
