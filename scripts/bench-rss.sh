#!/usr/bin/env bash
# Measures the daemon's resident memory (VmRSS of the sortie process alone; agents are separate
# processes and not counted):
#   1. idle: `sortie demo --speed 10` (file tracker + in-process mock agent) after its backlog settles
#      (nothing running or retrying);
#   2. busy: 50 issues, each with a running fake agent (claude-code kind, scripted to hang).
# Usage: scripts/bench-rss.sh [path/to/sortie]   (default: builds and uses target/release/sortie)
# Prints one line per measurement; exits non-zero if a phase does not reach its state in time.
set -euo pipefail
cd "$(dirname "$0")/.."

SORTIE=${1:-}
if [ -z "$SORTIE" ]; then
  cargo build --release --quiet --bin sortie
  SORTIE=target/release/sortie
fi
cargo build --quiet --bin fake-agent
FAKE=$(pwd)/target/debug/fake-agent
SORTIE=$(realpath "$SORTIE")

WORK=$(mktemp -d)
PID=
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits (up to $3 seconds) until the state document satisfies the Python expression $2 over `s`.
wait_state() {
  local port=$1 expr=$2 limit=$3
  python3 - "$port" "$expr" "$limit" <<'PY'
import json, sys, time, urllib.request
port, expr, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = time.time() + limit
while time.time() < deadline:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/state", timeout=5) as r:
            s = json.load(r)
        if eval(expr, {"s": s, "len": len}):
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.5)
print(f"timed out waiting for: {expr}", file=sys.stderr)
sys.exit(1)
PY
}

# Highest VmRSS over 5 samples one second apart, in KiB.
rss_kib() {
  local max=0 v
  for _ in 1 2 3 4 5; do
    v=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status")
    [ "$v" -gt "$max" ] && max=$v
    sleep 1
  done
  echo "$max"
}

report() { # label kib
  awk -v l="$1" -v k="$2" 'BEGIN { printf "%-28s %6.1f MiB (%d KiB)\n", l, k/1024, k }'
}

running() { echo "len(s.get('running', [])) == $1 and len(s.get('retrying', [])) == 0"; }

# ---- 1. idle demo -------------------------------------------------------------------------
PORT=$(free_port)
# Run from inside the demo directory: relative paths in the demo workflow stay in $WORK.
mkdir -p "$WORK/demo"
( cd "$WORK/demo" && exec "$SORTIE" demo --speed 10 --dir "$WORK/demo" --port "$PORT" >"$WORK/demo.log" 2>&1 ) &
PID=$!
wait_state "$PORT" "$(running 0) and s.get('generated_at') is not None" 120
sleep 2
IDLE=$(rss_kib)
report "idle (demo, settled)" "$IDLE"
kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=

# ---- 2. fifty running agents --------------------------------------------------------------
N=50
mkdir -p "$WORK/busy"
python3 - "$WORK/busy/issues.json" "$N" <<'PY'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
json.dump([{"id": str(1000 + i), "identifier": f"LOAD-{i}", "title": f"Load issue {i}",
            "state": "To Do", "priority": 2} for i in range(1, n + 1)], open(path, "w"))
PY
cat >"$WORK/busy/scenario.jsonl" <<'JSONL'
{"init": {}}
{"assistant": {"text": "Working on it.", "input_tokens": 1200, "output_tokens": 300, "model": "fake-model-1"}}
{"hang": true}
JSONL
PORT=$(free_port)
cat >"$WORK/busy/WORKFLOW.md" <<EOF2
---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done]
file:
  path: ./issues.json
polling:
  interval_ms: 2000
workspace:
  root: ./workspaces
agent:
  kind: claude-code
  command: $FAKE
  env: [FAKE_AGENT_*]
  max_turns: 1
  max_concurrent_agents: $N
claude-code:
  permission_mode: acceptEdits
server:
  port: $PORT
---
Work on {{ .issue.identifier }}.
EOF2
( cd "$WORK/busy" && FAKE_AGENT_SCENARIO="$WORK/busy/scenario.jsonl" exec "$SORTIE" WORKFLOW.md >"$WORK/busy.log" 2>&1 ) &
PID=$!
wait_state "$PORT" "len(s.get('running', [])) == $N" 120
sleep 3
BUSY=$(rss_kib)
report "$N running agents" "$BUSY"
AGENTS=$(pgrep -c -P "$PID" || true)
echo "agent processes (children, not counted above): $AGENTS"
