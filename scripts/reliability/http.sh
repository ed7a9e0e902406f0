#!/usr/bin/env bash
# Hostile HTTP loads against a sortie binary on 127.0.0.1, one line per figure with its target
# (`name: value (target …) ok|FAIL`); exits non-zero when a target is missed. The loads:
#   1. 500 connections holding an unfinished webhook body (8 MiB announced, all but one byte
#      sent), over configured and unconfigured kinds, signed-looking and unsigned, from five
#      client addresses, in three waves of 12 s (RELIABILITY_HOLD_WAVES): peak RSS, RSS back
#      near idle after the load, /livez from another address throughout;
#   2. one address holding 1,000 idle sockets (re-opened as the server closes them) and 300
#      slow request heads: /livez from another address, 25 probes;
#   3. unsigned and wrongly signed deliveries flooding a kind, then a signed delivery; the
#      WARN lines the refusals cost;
#   4. one keep-alive connection sending refused deliveries back to back for 10 s: the WARN
#      lines they cost;
#   5. a captured delivery re-sent under a fresh delivery id.
# Client addresses 127.0.0.2… are all loopback on Linux.
#
# Usage: scripts/reliability/http.sh [path/to/sortie]   (default: builds target/release/sortie;
#        the shipped static binary is scripts/build-static.sh's)
# Needs python3. Takes about two minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."

SORTIE=${1:-}
if [ -z "$SORTIE" ]; then
  cargo build --release --quiet --bin sortie
  SORTIE=target/release/sortie
fi
SORTIE=$(realpath "$SORTIE")
# The clients hold some 2,000 sockets; sortie raises its own limit at start.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

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

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SECRET=reliability-webhook-secret-5b1f
echo '[]' >"$WORK/issues.json"
cat >"$WORK/WORKFLOW.md" <<EOF
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
server:
  port: $PORT
---
Work on {{ .issue.identifier }}.
EOF
( cd "$WORK" && SORTIE_WEBHOOK_SECRET_GITHUB="$SECRET" exec "$SORTIE" WORKFLOW.md >"$WORK/sortie.log" 2>&1 ) &
PID=$!

python3 - "$PID" "$PORT" "$WORK/sortie.log" "$SECRET" <<'PY'
import hashlib, hmac, json, os, socket, statistics, sys, threading, time

pid, port, log_path, secret = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
MIB = 1024 * 1024
failed = []


def report(name, value, target, ok):
    print(f"{name}: {value} (target {target}) {'ok' if ok else 'FAIL'}", flush=True)
    if not ok:
        failed.append(name)


def rss_kib(field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit(f"no {field} for {pid}")


def connect(src="127.0.0.1", timeout=10):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def read_response(s, timeout=10):
    """One response: (status, headers dict, body); None when nothing complete arrived."""
    s.settimeout(timeout)
    raw = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if b"\r\n\r\n" in raw:
            head, rest = raw.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
            n = int(headers.get("content-length", "0"))
            if len(rest) >= n:
                return int(lines[0].split()[1]), headers, rest[:n]
        try:
            chunk = s.recv(65536)
        except OSError:
            return None
        if not chunk:
            return None
        raw += chunk
    return None


def get(path, src="127.0.0.1", timeout=5):
    """(status, seconds) of one GET on a new connection; status 0 when unanswered."""
    started = time.time()
    try:
        s = connect(src, timeout)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        r = read_response(s, timeout)
        s.close()
        return (r[0] if r else 0), time.time() - started
    except OSError:
        return 0, time.time() - started


def delivery(kind, body, headers, keep_alive=False):
    h = f"POST /api/v1/webhooks/{kind} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    if not keep_alive:
        h += "Connection: close\r\n"
    h += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return h.encode() + b"\r\n" + body


def signed(body, delivery_id, key=secret):
    sig = hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
    return {"X-GitHub-Event": "issues", "X-GitHub-Delivery": delivery_id, "X-Hub-Signature-256": f"sha256={sig}"}


def send_one(kind, body, headers, src="127.0.0.1"):
    try:
        s = connect(src)
        s.sendall(delivery(kind, body, headers))
        r = read_response(s)
        s.close()
        return r[0] if r else 0
    except OSError:
        return 0


def warn_lines():
    with open(log_path, errors="replace") as f:
        return [l for l in f if "level=WARN" in l]


def lines_per_reason(lines):
    """WARN lines per (scope or kind, reason) field pair."""
    counts = {}
    for l in lines:
        fields = dict(f.split("=", 1) for f in l.split() if "=" in f)
        key = (fields.get("scope", fields.get("kind", "")), fields.get("reason", l))
        counts[key] = counts.get(key, 0) + 1
    return counts


class Prober(threading.Thread):
    """/livez from 127.0.0.1 every `every` seconds until stopped."""

    def __init__(self, every=0.2):
        super().__init__(daemon=True)
        self.every, self.stop, self.results = every, threading.Event(), []

    def run(self):
        while not self.stop.is_set():
            self.results.append(get("/livez"))
            self.stop.wait(self.every)


# ---- start ---------------------------------------------------------------------------------
deadline = time.time() + 60
while get("/livez")[0] != 200:
    if time.time() > deadline:
        raise SystemExit("sortie did not answer /livez within 60 s")
    time.sleep(0.2)
time.sleep(3)
samples = []
for _ in range(6):
    samples.append(rss_kib())
    time.sleep(0.5)
idle = statistics.median(samples)
print(f"idle_rss: {idle / 1024:.1f} MiB (measured, no target)", flush=True)

# ---- 1. 500 connections holding an unfinished webhook body ---------------------------------
BODY = 8 * MIB
kinds = [
    ("github", {"X-Hub-Signature-256": "sha256=" + "0" * 64, "X-GitHub-Delivery": "hold"}),  # configured, signed-looking
    ("github", {"X-GitHub-Delivery": "hold"}),  # configured, unsigned
    ("gitea", {"X-Gitea-Signature": "0" * 64}),  # known kind, not configured
    ("bitbucket", {}),  # unknown kind
]
chunk = b" " * MIB
# Waves of the load one after another: a second wave meets whatever the first left behind.
WAVES = int(os.environ.get("RELIABILITY_HOLD_WAVES", "3"))
stop_hold = threading.Event()
holders = []


def hold(i):
    kind, headers = kinds[i % len(kinds)]
    src = f"127.0.0.{10 + i % 5}"
    try:
        s = connect(src, timeout=30)
        head = delivery(kind, b"", headers).replace(b"Content-Length: 0", f"Content-Length: {BODY}".encode())
        s.sendall(head)
        left = BODY - 1
        while left > 0 and not stop_hold.is_set():
            n = min(left, len(chunk))
            s.sendall(chunk[:n])
            left -= n
        holders.append(s)
        stop_hold.wait(60)
        s.close()
    except OSError:
        pass


prober = Prober()
prober.start()
peak_sampled = 0
for wave in range(WAVES):
    stop_hold.clear()
    holders.clear()
    threads = [threading.Thread(target=hold, args=(i,), daemon=True) for i in range(500)]
    for t in threads:
        t.start()
    until = time.time() + 12  # the body deadline is 10 s
    while time.time() < until:
        peak_sampled = max(peak_sampled, rss_kib())
        time.sleep(0.1)
    stop_hold.set()
    for t in threads:
        t.join(timeout=5)
prober.stop.set()
prober.join()
peak = max(peak_sampled, rss_kib("VmHWM"))
report("webhook_hold_peak_rss", f"{peak / 1024:.1f} MiB", "<= 100 MiB", peak <= 100 * 1024)
ok = sum(1 for s, _ in prober.results if s == 200)
worst = max(t for _, t in prober.results)
report("webhook_hold_livez", f"{ok} of {len(prober.results)} answered 200, slowest {worst * 1000:.0f} ms",
       "all", ok == len(prober.results) and ok > 0)
started = time.time()
back = None
while time.time() - started < 30:
    now = rss_kib()
    if now <= idle + 20 * 1024:
        back = time.time() - started
        break
    time.sleep(0.5)
after = rss_kib()
report("webhook_hold_rss_back_near_idle",
       f"{after / 1024:.1f} MiB after {back:.1f} s" if back is not None else f"{after / 1024:.1f} MiB after 30 s",
       f"<= idle + 20 = {(idle + 20 * 1024) / 1024:.1f} MiB within 30 s", back is not None)

# ---- 2. 1,000 idle sockets and 300 slow heads from one address -----------------------------
stop_hog = threading.Event()
hog_open = threading.Event()
refused = [0]


def hog():
    def opened():
        s = connect("127.0.0.2")
        s.setblocking(False)
        return s
    socks = [opened() for _ in range(1000)]
    hog_open.set()
    while not stop_hog.is_set():
        for i, s in enumerate(socks):
            try:
                data = s.recv(4096)
                if not data:
                    s.close()
                    socks[i] = opened()
                elif b"too_many_connections" in data:
                    refused[0] += 1
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                socks[i] = opened()
        stop_hog.wait(0.2)
    for s in socks:
        s.close()


def slow_heads():
    head = f"GET /livez HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode()
    socks = [[connect("127.0.0.2"), 0] for _ in range(300)]
    while not stop_hog.is_set():
        for e in socks:
            try:
                e[0].sendall(head[e[1]:e[1] + 1] or b"x")
                e[1] += 1
            except OSError:
                e[0].close()
                e[0], e[1] = connect("127.0.0.2"), 0
        stop_hog.wait(0.2)
    for s, _ in socks:
        s.close()


hog_t = threading.Thread(target=hog, daemon=True)
slow_t = threading.Thread(target=slow_heads, daemon=True)
hog_t.start()
slow_t.start()
hog_open.wait(30)
time.sleep(1)
probes = []
for _ in range(25):
    probes.append(get("/livez"))
    time.sleep(0.2)
state = get("/api/v1/state")[0]
stop_hog.set()
hog_t.join()
slow_t.join()
ok = sum(1 for s, _ in probes if s == 200)
worst = max(t for _, t in probes)
report("idle_sockets_one_address_livez", f"{ok} of 25 answered 200, slowest {worst * 1000:.0f} ms "
       f"({refused[0]} of the hog's connections refused)", "25 of 25", ok == 25)
report("idle_sockets_one_address_state", state, "200", state == 200)

# ---- 3. unsigned and wrongly signed floods, then a signed delivery -------------------------
warn_before = len(warn_lines())
flood_started = time.time()
sent = [0]


def unsigned_flood(seconds):
    until = time.time() + seconds
    while time.time() < until:
        send_one("github", b"{}", {"X-GitHub-Delivery": f"u-{time.time()}"})
        sent[0] += 1


def bad_signature_flood(seconds):
    until = time.time() + seconds
    s = None
    while time.time() < until:
        try:
            if s is None:
                s = connect()
            body = json.dumps({"n": time.time()}).encode()
            s.sendall(delivery("github", body, signed(body, f"b-{time.time()}", key="wrong"), keep_alive=True))
            r = read_response(s)
            sent[0] += 1
            if r is None or r[1].get("connection") == "close":
                s.close()
                s = None
        except OSError:
            s = None


flooders = [threading.Thread(target=unsigned_flood, args=(5,)) for _ in range(3)]
flooders.append(threading.Thread(target=bad_signature_flood, args=(5,)))
for t in flooders:
    t.start()
for t in flooders:
    t.join()
body = json.dumps({"action": "opened", "issue": {"number": 1}, "repository": {"full_name": "o/r"}}).encode()
status = send_one("github", body, signed(body, "signed-after-flood"))
report("signed_delivery_after_flood", f"{status} after {sent[0]} refused deliveries in 5 s", "202", status == 202)
time.sleep(1.5)  # the count left over is logged once its second is over
new_lines = warn_lines()[warn_before:]
secs = time.time() - flood_started
per_reason = lines_per_reason(new_lines)
most = max(per_reason.values(), default=0)
allowed = int(secs) + 2
report("flood_warn_lines", f"{len(new_lines)} lines for {sent[0]} refusals in {secs:.0f} s, at most {most} for one of {len(per_reason)} reasons",
       f"<= {allowed} per reason (once a second)", most <= allowed)

# ---- 4. one keep-alive connection sending refused deliveries for 10 s ----------------------
warn_before = len(warn_lines())
started = time.time()
count = 0
s = connect()
while time.time() - started < 10:
    b = json.dumps({"n": count}).encode()
    s.sendall(delivery("github", b, signed(b, f"k-{count}", key="wrong"), keep_alive=True))
    r = read_response(s)
    if r is None:
        s.close()
        s = connect()
    count += 1
s.close()
time.sleep(1.5)
new_lines = warn_lines()[warn_before:]
most = max(lines_per_reason(new_lines).values(), default=0)
report("keepalive_refused_warn_lines", f"{len(new_lines)} lines for {count} refused requests in 10 s",
       "<= 12 (once a second, and the count left over)", most <= 12 and len(new_lines) <= 24)

# ---- 5. a captured delivery re-sent under a fresh delivery id ------------------------------
body = json.dumps({"action": "labeled", "issue": {"number": 2}, "repository": {"full_name": "o/r"}}).encode()
first = send_one("github", body, signed(body, "captured-1"), src="127.0.0.3")
again = send_one("github", body, signed(body, "captured-2-fresh"), src="127.0.0.3")
report("replay_with_fresh_delivery_id", f"{first} then {again}", "202 then 409", (first, again) == (202, 409))

print(f"final_rss: {rss_kib() / 1024:.1f} MiB; peak (VmHWM) {rss_kib('VmHWM') / 1024:.1f} MiB (measured, no target)")
if failed:
    print("FAILED: " + ", ".join(failed))
    sys.exit(1)
PY
