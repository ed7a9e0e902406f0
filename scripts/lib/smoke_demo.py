#!/usr/bin/env python3
"""Smoke run of `sortie demo`: starts the given command, which must run the demo on PORT, and
passes when the daemon serves /livez, the dashboard and /metrics, and runs a session (a running
issue with at least one turn: its after_create and before_run hooks succeeded and the mock agent
answered), and when it exits 0 within 30 s of SIGTERM (the graceful drain).

The command may be a sandbox around sortie (bwrap): SIGTERM goes to the descendant process
named `sortie` when there is one, as a container engine's stop signals the container's main
process.

Usage: smoke_demo.py --port PORT --log FILE [--expect-glob PATTERN ...] -- COMMAND...
  --expect-glob  a file pattern that must match at least one file once a session ran
"""

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

START_DEADLINE_S = 60
STOP_DEADLINE_S = 30


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=5) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


def observe(base, seen):
    """One pass of the probes; records each property seen so far."""
    if "livez" not in seen and get(base, "/livez")[0] == 200:
        seen.add("livez")
    status, ctype, body = get(base, "/ui/")
    if status == 200 and ctype.startswith("text/html") and b"<script" in body:
        seen.add("ui")
    status, _, body = get(base, "/metrics")
    if status == 200 and b"sortie_build_info" in body:
        seen.add("metrics")
    state = json.loads(get(base, "/api/v1/state")[2])
    if any(r.get("turn_count", 0) >= 1 for r in state.get("running", [])):
        seen.add("session")


def descendants(pid):
    """Pids below `pid`, breadth first (Linux /proc)."""
    out, queue = [], [pid]
    while queue:
        p = queue.pop(0)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            out.extend(kids)
            queue.extend(kids)
    return out


def main_pid(proc):
    """The sortie process: the command itself or its first descendant named sortie."""
    for p in [proc.pid] + descendants(proc.pid):
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == "sortie":
                    return p
        except OSError:
            continue
    return proc.pid


def fail(msg, log_path):
    print(f"smoke: {msg}", file=sys.stderr)
    try:
        with open(log_path, errors="replace") as f:
            print("smoke: daemon log:\n" + f.read()[-20000:], file=sys.stderr)
    except OSError:
        pass
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--expect-glob", action="append", default=[])
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("a command is required after --")

    base = f"http://127.0.0.1:{args.port}"
    env = dict(os.environ, SORTIE_PRICE_TABLE_FETCH="off")
    with open(args.log, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        seen = set()
        deadline = time.time() + START_DEADLINE_S
        wanted = {"livez", "ui", "metrics", "session"}
        while time.time() < deadline and seen != wanted:
            if proc.poll() is not None:
                fail(f"the daemon exited early with status {proc.returncode}", args.log)
            try:
                observe(base, seen)
            except Exception:
                pass
            time.sleep(0.5)
        if seen != wanted:
            fail(f"not seen within {START_DEADLINE_S} s: {sorted(wanted - seen)}", args.log)
        for pattern in args.expect_glob:
            if not glob.glob(pattern):
                fail(f"no file matches {pattern}", args.log)
        print("smoke: /livez, /ui/, /metrics served and a demo session ran its first turn")

        os.kill(main_pid(proc), signal.SIGTERM)
        try:
            rc = proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            fail(f"still running {STOP_DEADLINE_S} s after SIGTERM", args.log)
        if rc != 0:
            fail(f"exit status {rc} after SIGTERM", args.log)
        print("smoke: SIGTERM drained, exit 0")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
