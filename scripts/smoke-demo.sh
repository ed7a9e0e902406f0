#!/usr/bin/env bash
# Smoke run of a built sortie binary on the embedded demo, as a new user would start it:
# `sortie demo` in an empty directory on a free port. Passes when the daemon serves /livez, the
# dashboard and /metrics, dispatches a demo issue, and exits 0 after SIGTERM drains it.
# Usage: scripts/smoke-demo.sh path/to/sortie
set -euo pipefail
BIN=$(realpath "${1:?usage: scripts/smoke-demo.sh path/to/sortie}")
WORK=$(mktemp -d)
PID=
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -KILL "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# CI never reaches the internet: the shared price table's download is off.
SORTIE_PRICE_TABLE_FETCH=off "$BIN" demo --dir "$WORK/demo" --port "$PORT" 2>"$WORK/sortie.log" &
PID=$!

# Waits up to 60 s until the check passes; prints the daemon log and fails otherwise.
python3 - "$PORT" <<'PY' || { echo "smoke: failed; daemon log:" >&2; cat "$WORK/sortie.log" >&2; exit 1; }
import json, sys, time, urllib.request
port = sys.argv[1]
base = f"http://127.0.0.1:{port}"
def get(path):
    with urllib.request.urlopen(base + path, timeout=5) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()
deadline = time.time() + 60
seen = {}
while time.time() < deadline and len(seen) < 4:
    try:
        if "livez" not in seen and get("/livez")[0] == 200:
            seen["livez"] = True
        status, ctype, body = get("/ui/")
        if status == 200 and ctype.startswith("text/html") and b"<script" in body:
            seen["ui"] = True
        status, ctype, body = get("/metrics")
        if status == 200 and b"sortie_build_info" in body:
            seen["metrics"] = True
        s = json.loads(get("/api/v1/state")[2])
        if s.get("running") or s.get("retrying"):
            seen["dispatch"] = True
    except Exception:
        pass
    time.sleep(0.5)
missing = {"livez", "ui", "metrics", "dispatch"} - set(seen)
if missing:
    print(f"smoke: not seen within 60 s: {sorted(missing)}", file=sys.stderr)
    sys.exit(1)
print("smoke: /livez, /ui/, /metrics served and a demo issue dispatched")
PY

kill -TERM "$PID"
for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$PID" 2>/dev/null; then echo "smoke: still running 30 s after SIGTERM" >&2; exit 1; fi
rc=0; wait "$PID" || rc=$?
PID=
if [ "$rc" != 0 ]; then echo "smoke: exit status $rc after SIGTERM" >&2; cat "$WORK/sortie.log" >&2; exit 1; fi
echo "smoke: SIGTERM drained, exit 0"
