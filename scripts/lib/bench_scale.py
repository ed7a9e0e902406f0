"""The scale bench's driver (see scripts/bench-scale.sh): one fresh daemon per N, N concurrent
fake agents over a large file backlog, measured from outside the daemon (/proc, HTTP, the
database file) while the agents stream.

Each agent plays: init, wait for the shared gate file, then HOLD assistant events one second
apart (tokens on every event), then its result. The bench opens the gate once N agents run, so
the measured window has all N streaming at once. After the first wave has finished, the next
N issues are dispatched; the daemon is stopped with SIGTERM while they run (graceful stop time).
"""

import json
import os
import selectors
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request

IN_TOK, OUT_TOK = 10, 5
READERS = 8
STREAMS = 50


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(port, path, headers=None, timeout=30):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def state(port):
    return json.loads(get(port, "/api/v1/state"))


def metric_sum(text, name):
    """Sum of every sample of `name` (all label sets) in an exposition text."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def hist_quantile(text, name, q):
    """The q-quantile (ms) of histogram `name` in an exposition text, interpolated inside its
    bucket as Prometheus' histogram_quantile does; nan without observations."""
    buckets = []
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return lower * 1000
            inside = count - below
            return (lower + (le - lower) * ((rank - below) / inside if inside else 1.0)) * 1000
        lower, below = le, count
    return float("nan")


def metrics(port):
    return get(port, "/metrics").decode()


def proc_stat(pid):
    """(rss KiB, threads, cpu seconds) of one process."""
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    return rss, threads, cpu


def wait_for(what, limit, cond, every=0.5):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except (OSError, ValueError):
            pass
        time.sleep(every)
    raise SystemExit(f"bench: timed out after {limit} s waiting for {what}")


def write_setup(d, n, issues, hold, sortie_port, fake):
    gate = os.path.join(d, "gate")
    with open(os.path.join(d, "scenario.jsonl"), "w") as f:
        f.write(json.dumps({"init": {}}) + "\n")
        f.write(json.dumps({"wait_file": gate}) + "\n")
        for i in range(hold):
            f.write(json.dumps({"assistant": {"id": f"m{i}", "text": f"working {i}",
                                              "input_tokens": IN_TOK, "output_tokens": OUT_TOK}}) + "\n")
            f.write(json.dumps({"sleep_ms": 1000}) + "\n")
        f.write(json.dumps({"result": {"subtype": "success", "text": "done",
                                       "input_tokens": IN_TOK * hold,
                                       "output_tokens": OUT_TOK * hold}}) + "\n")
    # Two waves are active; the rest of the backlog is parsed on every poll but never eligible.
    rows = []
    for i in range(issues):
        rows.append({"id": str(100000 + i), "identifier": f"S-{i}", "title": f"Scale issue {i}",
                     "state": "To Do" if i < 2 * n else "Backlog", "priority": 1 + i % 4,
                     "labels": ["bench"], "issue_type": "Task",
                     "url": f"https://tracker.example/S-{i}",
                     "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"})
    with open(os.path.join(d, "issues.json"), "w") as f:
        json.dump(rows, f)
    with open(os.path.join(d, "WORKFLOW.md"), "w") as f:
        f.write(f"""---
tracker:
  kind: file
  active_states: [To Do]
  terminal_states: [Done]
  handoff_state: Review
file:
  path: ./issues.json
polling:
  interval_ms: 5000
workspace:
  root: ./ws
agent:
  kind: claude-code
  command: {fake}
  env: [FAKE_AGENT_*]
  max_turns: 1
  max_concurrent_agents: {n}
  stall_timeout_ms: 600000
claude-code:
  permission_mode: acceptEdits
server:
  port: {sortie_port}
---
Work on {{{{ .issue.identifier }}}}.
""")
    return gate


def state_latency(port, seconds):
    """p50/p99 (ms) of gzip /api/v1/state answers over READERS concurrent readers."""
    lat, errors = [], []
    stop_at = time.monotonic() + seconds

    def reader():
        while time.monotonic() < stop_at:
            t = time.monotonic()
            try:
                get(port, "/api/v1/state", {"Accept-Encoding": "gzip"})
                lat.append((time.monotonic() - t) * 1000)
            except OSError as e:
                errors.append(str(e))

    threads = [threading.Thread(target=reader) for _ in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat.sort()
    if not lat:
        return float("nan"), float("nan"), len(errors)
    return lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))], len(errors)


class Stream:
    """One /api/v1/events stream on a non-blocking socket, recording (time, revision) of each
    change frame."""

    def __init__(self, sel, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(f"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        self.sock.setblocking(False)
        self.buf, self.head, self.changes = b"", False, []
        sel.register(self.sock, selectors.EVENT_READ, self)

    def on_read(self):
        try:
            data = self.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            return
        self.buf += data
        now = time.monotonic()
        if not self.head:
            if b"\r\n\r\n" not in self.buf:
                return
            self.buf = self.buf.split(b"\r\n\r\n", 1)[1]
            self.head = True
        while b"\n\n" in self.buf:
            frame, self.buf = self.buf.split(b"\n\n", 1)
            fields = dict(l.split(": ", 1) for l in frame.decode(errors="replace").split("\n") if ": " in l)
            if fields.get("event") == "change" and "id" in fields:
                try:
                    self.changes.append((now, int(fields["id"].split(";")[0])))
                except ValueError:
                    pass


def sse_latency(port):
    """Seconds from a refresh until all STREAMS streams received a newer change (the worst
    stream), or inf when one never did within 10 s."""
    sel = selectors.DefaultSelector()
    streams = [Stream(sel, port) for _ in range(STREAMS)]

    def pump(until, done):
        while time.monotonic() < until and not done():
            for key, _ in sel.select(timeout=0.01):
                key.data.on_read()

    pump(time.monotonic() + 10, lambda: all(s.changes for s in streams))
    pump(time.monotonic() + 1.2, lambda: False)
    before = max((s.changes[-1][1] for s in streams if s.changes), default=0)
    trigger = time.monotonic()
    urllib.request.urlopen(
        urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/refresh", data=b"", method="POST"),
        timeout=10).read()

    def got(s):
        return next((t for t, rev in s.changes if rev > before and t >= trigger), None)

    pump(trigger + 10, lambda: all(got(s) is not None for s in streams))
    worst = max(((got(s) or float("inf")) - trigger for s in streams), default=float("inf"))
    for s in streams:
        s.sock.close()
    return worst


def first_wave_checks(db_path, hold):
    """(runs, events lost, tokens exact) over the succeeded runs: each must have stored all its
    HOLD assistant messages (as `notification` events) and exactly HOLD x the per-event tokens."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    rows = db.execute(
        "SELECT r.dispatch_id, r.input_tokens, r.output_tokens, "
        "(SELECT count(*) FROM agent_events e WHERE e.dispatch_id = r.dispatch_id "
        " AND e.event_type = 'notification') "
        "FROM run_history r WHERE r.status = 'succeeded'").fetchall()
    db.close()
    lost = sum(max(0, hold - r[3]) for r in rows)
    exact = all(r[1] == IN_TOK * hold and r[2] == OUT_TOK * hold for r in rows)
    return len(rows), lost, exact


class Sampler(threading.Thread):
    """Peak RSS, threads and WAL size, sampled once a second until stopped."""

    def __init__(self, pid, wal):
        super().__init__(daemon=True)
        self.pid, self.wal, self.done = pid, wal, threading.Event()
        self.rss = self.threads = self.wal_bytes = 0

    def run(self):
        while not self.done.wait(1.0):
            try:
                rss, threads, _ = proc_stat(self.pid)
            except OSError:
                return
            self.rss, self.threads = max(self.rss, rss), max(self.threads, threads)
            if os.path.exists(self.wal):
                self.wal_bytes = max(self.wal_bytes, os.path.getsize(self.wal))


def run_one(sortie, fake, n, issues, hold, workdir):
    d = os.path.join(workdir, f"n{n}")
    os.makedirs(d)
    port = free_port()
    gate = write_setup(d, n, issues, hold, port, fake)
    env = dict(os.environ, FAKE_AGENT_SCENARIO=os.path.join(d, "scenario.jsonl"))
    log = open(os.path.join(d, "sortie.log"), "w")
    proc = subprocess.Popen([sortie, "--port", str(port), "--log-level", "warn", "WORKFLOW.md"],
                            cwd=d, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        return measure(proc, port, d, gate, n, hold)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def measure(proc, port, d, gate, n, hold):
    pid = proc.pid

    def up():
        if proc.poll() is not None:
            raise SystemExit(f"bench: sortie exited with {proc.returncode}; see {d}/sortie.log")
        return get(port, "/livez") is not None

    wait_for("the daemon", 60, up)
    ramp_start = time.monotonic()
    wait_for(f"{n} running agents", 300, lambda: state(port)["counts"]["running"] >= n, every=1)
    ramp = time.monotonic() - ramp_start
    sampler = Sampler(pid, os.path.join(d, ".sortie.db-wal"))
    sampler.start()
    open(gate, "w").close()
    t0 = time.monotonic()
    # A quiet stretch first: the daemon's own CPU while N agents stream one event a second each.
    quiet = max(2, min(20, hold // 3))
    time.sleep(2)
    m0, (_, _, cpu0), c0 = metrics(port), proc_stat(pid), time.monotonic()
    time.sleep(quiet)
    m1, (_, _, cpu1), c1 = metrics(port), proc_stat(pid), time.monotonic()
    cpu_cores = (cpu1 - cpu0) / (c1 - c0)
    cpu_per_event_us = cpu_cores / n * 1e6
    poll_n = metric_sum(m1, "sortie_poll_duration_seconds_count") - metric_sum(
        m0, "sortie_poll_duration_seconds_count")
    poll_ms = ((metric_sum(m1, "sortie_poll_duration_seconds_sum")
                - metric_sum(m0, "sortie_poll_duration_seconds_sum")) / poll_n * 1000
               if poll_n else float("nan"))
    # Then the readers: gzip state under READERS clients, and the event streams.
    p50, p99, state_errors = state_latency(port, 10)
    sse = sse_latency(port)
    db_path = os.path.join(d, ".sortie.db")

    def wave_done():
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
        done = db.execute("SELECT count(*) FROM run_history WHERE status = 'succeeded'").fetchone()[0]
        db.close()
        return done >= n

    wait_for("the first wave recorded", hold + 300, wave_done, every=1)
    m2 = metrics(port)
    shed = metric_sum(m2, "sortie_agent_events_shed_total")
    # Since the daemon started: the ramp's dispatch passes and every write of the first wave.
    tick_p99 = hist_quantile(m2, "sortie_dispatch_pass_duration_seconds", 0.99)
    write_p99 = hist_quantile(m2, "sortie_store_command_duration_seconds", 0.99)
    runs, lost, exact = first_wave_checks(db_path, hold)
    # The second wave starts at once (the gate stays open); stop the daemon while it runs.
    wait_for("the second wave running", 300, lambda: state(port)["counts"]["running"] >= n, every=1)
    sampler.done.set()
    stop_at = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        pass
    stop_s = time.monotonic() - stop_at if proc.poll() is not None else float("inf")
    return {
        "n": n, "ramp_s": ramp, "rss_mib": sampler.rss / 1024, "threads": sampler.threads,
        "cpu_cores": cpu_cores, "cpu_us_per_event": cpu_per_event_us, "poll_ms": poll_ms,
        "tick_p99_ms": tick_p99, "write_p99_ms": write_p99,
        "state_p50_ms": p50, "state_p99_ms": p99, "state_errors": state_errors,
        "sse_s": sse, "wal_mib": sampler.wal_bytes / (1 << 20), "runs": runs,
        "events_lost": int(lost + shed), "tokens_exact": exact and runs >= n, "stop_s": stop_s,
    }


TARGETS = {"rss_mib": 250, "cpu_cores": 1.0, "poll_ms": 100, "state_p99_ms": 50, "sse_s": 1.5,
           "events_lost": 0, "stop_s": 15}


def report(rows):
    cols = [("n", "N", "{:d}"), ("ramp_s", "ramp s", "{:.1f}"), ("rss_mib", "RSS MiB", "{:.1f}"),
            ("threads", "threads", "{:d}"), ("cpu_cores", "CPU cores", "{:.2f}"),
            ("cpu_us_per_event", "CPU us/event", "{:.0f}"), ("poll_ms", "poll ms", "{:.1f}"),
            ("tick_p99_ms", "tick p99 ms", "{:.1f}"), ("write_p99_ms", "write p99 ms", "{:.1f}"),
            ("state_p50_ms", "state p50", "{:.1f}"), ("state_p99_ms", "state p99", "{:.1f}"),
            ("sse_s", "SSE s", "{:.2f}"), ("wal_mib", "WAL MiB", "{:.1f}"),
            ("events_lost", "lost", "{:d}"), ("tokens_exact", "tokens exact", "{}"),
            ("stop_s", "stop s", "{:.1f}")]
    print(" | ".join(h for _, h, _ in cols))
    for r in rows:
        print(" | ".join(fmt.format(r[k]) for k, _, fmt in cols))
    last = rows[-1]
    failed = [k for k, limit in TARGETS.items() if not last[k] <= limit]
    if not last["tokens_exact"]:
        failed.append("tokens_exact")
    if failed:
        print(f"N={last['n']}: targets missed: {', '.join(failed)}")
        return 1
    print(f"N={last['n']}: every target met")
    return 0


def main():
    sortie, fake, ns, issues, hold, workdir = (sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
                                               int(sys.argv[5]), sys.argv[6])
    rows = []
    for n in (int(x) for x in ns.split(",")):
        r = run_one(sortie, fake, n, issues, hold, workdir)
        print(json.dumps(r), file=sys.stderr)
        rows.append(r)
    sys.exit(report(rows))


if __name__ == "__main__":
    main()
