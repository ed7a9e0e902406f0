#!/usr/bin/env bash
# Opens 200 event streams (GET /api/v1/events) at the same moment, triggers one change (a new
# issue in the file backlog plus POST /api/v1/refresh, so a mock agent is dispatched), and
# reports how long after the trigger the last stream received a change newer than the one
# the server had published before it, and how many streams got no response at all. Each
# round starts a fresh daemon; prints min / median over the rounds and pass/fail against the
# 1.5 s target (a stream coalesces changes to one per second, so 1.5 s leaves half a second
# for the burst itself). Not part of the test suite.
#
#   scripts/bench-sse.sh                    # release build, 200 clients, 3 rounds
#   BENCH_CLIENTS=50 BENCH_ROUNDS=5 scripts/bench-sse.sh
#   BENCH_PROFILE=debug scripts/bench-sse.sh
#
# Needs python3 (the clients: one non-blocking socket each, served by one selector loop).
set -euo pipefail

cd "$(dirname "$0")/.."
PROFILE="${BENCH_PROFILE:-release}"
CLIENTS="${BENCH_CLIENTS:-200}"
ROUNDS="${BENCH_ROUNDS:-3}"
TARGET_S="1.5"

if [ "$PROFILE" = release ]; then
  cargo build --release --bin sortie >/dev/null
  SORTIE="$PWD/target/release/sortie"
else
  cargo build --bin sortie >/dev/null
  SORTIE="$PWD/target/debug/sortie"
fi

DIR="$(mktemp -d)"
PID=""
stop_daemon() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  PID=""
}
cleanup() {
  stop_daemon
  rm -rf "$DIR"
}
trap cleanup EXIT

cat >"$DIR/WORKFLOW.md" <<'EOF'
---
tracker:
  kind: file
  active_states: [To Do]
  terminal_states: [Done]
file:
  path: ./issues.json
polling:
  interval_ms: 600000
workspace:
  root: ./ws
agent:
  kind: mock
  max_concurrent_agents: 4
mock:
  turn_delay_ms: 600000
  events_per_turn: 1
---
Work on {{ .issue.identifier }}.
EOF

wait_for() { # url
  for _ in $(seq 1 400); do
    if curl -fsS "$1" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  echo "bench: $1 did not answer" >&2
  exit 1
}

RESULTS="$DIR/results.txt"
: >"$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
  echo '[]' >"$DIR/issues.json"
  rm -rf "$DIR/ws" "$DIR"/.sortie.db*
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  (cd "$DIR" && exec "$SORTIE" --port "$PORT" --log-level warn WORKFLOW.md 2>"$DIR/run-$round.log") &
  PID=$!
  wait_for "http://127.0.0.1:$PORT/livez"
  python3 - "$PORT" "$CLIENTS" "$DIR/issues.json" "$round" "$PID" >>"$RESULTS" <<'EOF'
import errno, json, os, selectors, socket, sys, time, urllib.request

port, clients, issues_path, round_no, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
NO_RESPONSE_S = 10.0
REQUEST = f"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
sel = selectors.DefaultSelector()


class Client:
    """One stream on a non-blocking socket: when it connected, when its head came, and the
    change frames it received as (time, revision)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setblocking(False)
        self.started = time.monotonic()
        err = self.sock.connect_ex(("127.0.0.1", port))
        if err not in (0, errno.EINPROGRESS):
            raise SystemExit(f"bench: connect failed: {os.strerror(err)}")
        self.pending = REQUEST
        self.buf = b""
        self.head_at = self.status = None
        self.changes = []
        self.closed = False
        sel.register(self.sock, selectors.EVENT_WRITE | selectors.EVENT_READ, self)

    def on_ready(self, mask):
        if mask & selectors.EVENT_WRITE and self.pending:
            try:
                self.pending = self.pending[self.sock.send(self.pending):]
            except BlockingIOError:
                return
            except OSError:
                return self.close()
            if not self.pending:
                sel.modify(self.sock, selectors.EVENT_READ, self)
        if mask & selectors.EVENT_READ:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                return self.close()
            if not data:
                return self.close()
            self.buf += data
            self.parse()

    def parse(self):
        now = time.monotonic()
        if self.head_at is None:
            if b"\r\n\r\n" not in self.buf:
                return
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            self.head_at = now
            self.status = int(head.split()[1])
        while b"\n\n" in self.buf:
            frame, self.buf = self.buf.split(b"\n\n", 1)
            fields = dict(l.split(": ", 1) for l in frame.decode().split("\n") if ": " in l)
            if fields.get("event") == "change":
                self.changes.append((now, int(fields["id"].split(";")[0])))

    def close(self):
        if not self.closed:
            self.closed = True
            sel.unregister(self.sock)
            self.sock.close()


def pump(until, done):
    """Serves every socket's events until `done()` holds or `until` passes."""
    while time.monotonic() < until and not done():
        for key, mask in sel.select(timeout=0.01):
            key.data.on_ready(mask)


# The revision published now: the opening change of one control stream, once start-up
# publishes have settled.
control = Client()
pump(time.monotonic() + NO_RESPONSE_S, lambda: bool(control.changes))
pump(time.monotonic() + 1.2, lambda: False)
if not control.changes:
    raise SystemExit("bench: the control stream got no change")
before = control.changes[-1][1]

def threads():
    return len(os.listdir(f"/proc/{pid}/task"))


threads_before = threads()
# The burst: every connect is started before any socket is served.
burst_at = time.monotonic()
streams = [Client() for _ in range(clients)]
pump(burst_at + NO_RESPONSE_S, lambda: all(not c.pending or c.closed for c in streams))

# The change: a new issue in the backlog and a refresh, so the tick dispatches it.
issues = json.load(open(issues_path))
n = len(issues) + 1
issues.append({"id": str(n), "identifier": f"SSE-{n}", "title": f"SSE bench {n}", "state": "To Do",
               "priority": 1, "labels": [], "issue_type": "Task", "url": f"https://tracker.example/SSE-{n}",
               "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"})
with open(issues_path + ".tmp", "w") as f:
    json.dump(issues, f)
os.replace(issues_path + ".tmp", issues_path)
trigger_at = time.monotonic()
urllib.request.urlopen(urllib.request.Request(
    f"http://127.0.0.1:{port}/api/v1/refresh", data=b"", method="POST"), timeout=10).read()


def got_it(c):
    return next((t for t, rev in c.changes if rev > before and t >= trigger_at), None)


pump(max(trigger_at, burst_at) + NO_RESPONSE_S, lambda: all(got_it(c) is not None for c in streams))

threads_with_streams = threads()
heads = [c.head_at - c.started for c in streams if c.head_at is not None]
no_response = sum(1 for c in streams if c.head_at is None or c.head_at - c.started > NO_RESPONSE_S)
refused = sum(1 for c in streams if c.status not in (None, 200))
lat = sorted(got_it(c) - trigger_at for c in streams if got_it(c) is not None)
missed = clients - len(lat)
all_in = lat[-1] if not missed else float("inf")
median = lat[len(lat) // 2] if lat else float("nan")
print(f"round {round_no}: {clients} streams; requests sent {trigger_at - burst_at:.3f} s after the burst; "
      f"heads within {max(heads, default=float('nan')):.3f} s; no response {no_response}; refused {refused}; "
      f"change reached all in {all_in:.3f} s (median {median:.3f} s, missed {missed}); "
      f"daemon threads {threads_before} -> {threads_with_streams}", file=sys.stderr)
print(f"{all_in:.3f} {no_response} {missed}")
EOF
  stop_daemon
done

python3 - "$RESULTS" "$TARGET_S" "$CLIENTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
target, clients = float(sys.argv[2]), int(sys.argv[3])
times = sorted(float(r[0]) for r in rows)
no_resp = [int(r[1]) for r in rows]
missed = [int(r[2]) for r in rows]
med = statistics.median(times)
print(f"time until all {clients} streams had the change: min {times[0]:.3f} s, median {med:.3f} s "
      f"(target {target} s); no response: max {max(no_resp)} of {clients}; missed: max {max(missed)}")
ok = med <= target and max(no_resp) == 0 and max(missed) == 0
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
EOF
