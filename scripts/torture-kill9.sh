#!/usr/bin/env bash
# Crash torture: SIGKILLs the daemon over and over while flaky fake agents work through a
# backlog, restarts it each time, then checks that nothing was lost or duplicated.
# Not part of the test suite (slow, timing-dependent by design).
#
# Usage: scripts/torture-kill9.sh [--debug]
#   --debug   use target/debug binaries (built if needed) instead of a release build
#
# Environment (defaults in brackets):
#   KILLS [100]          SIGKILLs of the daemon, each after a random 0.5-3 s
#   ISSUES [60]          issues in the file-tracker backlog
#   MAX_SESSIONS [3]     agent.max_sessions
#   MAX_CONCURRENT [3]   agent.max_concurrent_agents
#   FAIL_PERCENT [15]    chance that one agent turn fails
#   FINISH_TIMEOUT [600] seconds to wait for the backlog to settle after the last kill
#   KEEP [0]             1: keep the temp directory even when every check passed
#   SORTIE_BIN []        run this sortie binary instead of building one (the fake agent is
#                        then the debug build)
#   WORKFLOWS [1]        workflows under the one daemon; above 1, a folder of that many
#                        workflows (each ISSUES issues of its own, identifiers W<k>-<n>) is run
#                        with `--workflows` and a sortie.yaml capping agents at MAX_CONCURRENT
#                        across them, and every check covers every workflow
#
# Checks, from the agents' own logs (not the database) where it matters:
#   runs lost            agent sessions per issue (fake-agent `log_turn` records, one session
#                        per supervisor `started_at`) vs. run_history rows of that issue
#   sessions > max       agent sessions launched per issue above MAX_SESSIONS
#   two agents alive     /proc sampled before each kill and after each restart: live
#                        fake-agent processes grouped by working directory (= issue)
#   retry due_at moved   /api/v1/state `retrying` before the kill vs. after the restart, same
#                        issue and attempt, more than 1 s apart
#   totals decreased     /api/v1/state `agent_totals` tokens after a restart below the ones
#                        served before the kill
#   agents orphaned      live fake-agent processes sampled 1 s after each kill, before the
#                        restart (no sortie runs then): the keeper must have stopped them
#   log lines            every line of sortie's log reads back as its text format (key=value,
#                        values bare or JSON strings, time/level/msg first and once each)
#   integrity_check      PRAGMA integrity_check of the database at the end
#   agents left          fake-agent processes alive after the final graceful shutdown
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$(pwd)

PROFILE=release
for arg in "$@"; do
    case "$arg" in
    --debug) PROFILE=debug ;;
    -h | --help)
        sed -n '2,32p' "$0"
        exit 0
        ;;
    *)
        echo "unknown argument: $arg" >&2
        exit 2
        ;;
    esac
done

KILLS=${KILLS:-100}
ISSUES=${ISSUES:-60}
MAX_SESSIONS=${MAX_SESSIONS:-3}
MAX_CONCURRENT=${MAX_CONCURRENT:-3}
FAIL_PERCENT=${FAIL_PERCENT:-15}
FINISH_TIMEOUT=${FINISH_TIMEOUT:-600}
KEEP=${KEEP:-0}
WORKFLOWS=${WORKFLOWS:-1}

command -v python3 >/dev/null || {
    echo "python3 is required" >&2
    exit 2
}
command -v curl >/dev/null || {
    echo "curl is required" >&2
    exit 2
}

if [ -n "${SORTIE_BIN:-}" ]; then
    # A given sortie (e.g. the static release build); the fake agent from a debug build.
    echo "using $SORTIE_BIN; building the debug fake agent..."
    cargo build --quiet --bin fake-agent
    SORTIE=$(realpath "$SORTIE_BIN")
    FAKE="$REPO/target/debug/fake-agent"
else
    echo "building $PROFILE binaries..."
    if [ "$PROFILE" = release ]; then
        cargo build --quiet --release --bin sortie --bin fake-agent
    else
        cargo build --quiet --bin sortie --bin fake-agent
    fi
    BIN="$REPO/target/$PROFILE"
    SORTIE="$BIN/sortie"
    FAKE="$BIN/fake-agent"
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/sortie-torture.XXXXXX")
SAMPLES="$DIR/samples"
mkdir -p "$SAMPLES" "$DIR/ws"
VIOLATIONS="$DIR/violations.log"
: >"$VIOLATIONS"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
BASE="http://127.0.0.1:$PORT"
DAEMON_PID=""

cleanup() {
    if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill -9 "$DAEMON_PID" 2>/dev/null || true
        wait "$DAEMON_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# --- the project ---------------------------------------------------------------------------
# write_issues PATH PREFIX: the backlog of one workflow.
write_issues() {
    python3 - "$1" "$ISSUES" "$2" <<'PY'
import json, sys
path, n, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
issues = [{
    "id": str(i), "identifier": f"{prefix}-{i}", "title": f"Torture issue {i}", "state": "To Do",
    "priority": 1 + i % 4, "labels": [], "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
} for i in range(1, n + 1)]
json.dump(issues, open(path, "w"), indent=1)
PY
}

cat >"$DIR/scenario.jsonl" <<EOF
{"log_turn": {"path": "$DIR/turns.log", "phase": "start"}}
{"init": {}}
{"sleep_random_ms": [300, 1500]}
{"assistant": {"text": "working", "input_tokens": 100, "output_tokens": 20}}
{"fail_percent": $FAIL_PERCENT}
{"result": {"subtype": "success", "text": "ok", "input_tokens": 100, "output_tokens": 20}}
{"log_turn": {"path": "$DIR/turns.log", "phase": "end"}}
EOF

# write_workflow PATH ISSUES_PATH: one workflow file.
write_workflow() {
    cat >"$1" <<EOF
---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done, Cancelled]
  handoff_state: Review
file:
  path: $2
polling:
  interval_ms: 500
workspace:
  root: $DIR/ws
agent:
  kind: claude-code
  command: $FAKE
  env: [FAKE_AGENT_*]
  max_turns: 4
  max_sessions: $MAX_SESSIONS
  max_concurrent_agents: $MAX_CONCURRENT
  max_retry_backoff_ms: 3000
---
Work on {{ .issue.identifier }}: {{ .issue.title }}
EOF
}

# The names `?workflow=` takes (`-`: the single workflow, asked without the parameter).
if [ "$WORKFLOWS" -gt 1 ]; then
    mkdir -p "$DIR/wf"
    NAMES=""
    for k in $(seq 1 "$WORKFLOWS"); do
        write_issues "$DIR/issues-w$k.json" "W$k"
        write_workflow "$DIR/wf/w$k.md" "$DIR/issues-w$k.json"
        NAMES="$NAMES w$k"
    done
    printf 'max_concurrent_agents: %s\ndb_path: %s\n' "$MAX_CONCURRENT" "$DIR/.sortie.db" >"$DIR/wf/sortie.yaml"
    TARGET=(--workflows "$DIR/wf")
else
    write_issues "$DIR/issues.json" T
    write_workflow "$DIR/WORKFLOW.md" ./issues.json
    NAMES="-"
    TARGET=("$DIR/WORKFLOW.md")
fi

# --- helpers -------------------------------------------------------------------------------
start_daemon() {
    (
        cd "$DIR"
        exec env IS_SANDBOX=1 FAKE_AGENT_SCENARIO="$DIR/scenario.jsonl" FAKE_AGENT_ARGV_LOG="$DIR/argv.log" \
            "$SORTIE" --port "$PORT" "${TARGET[@]}" >>"$DIR/sortie.log" 2>&1
    ) &
    DAEMON_PID=$!
    local deadline=$((SECONDS + 30))
    until curl -fsS -m 2 "$BASE/livez" >/dev/null 2>&1; do
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            echo "sortie exited during start; log tail:" >&2
            tail -n 30 "$DIR/sortie.log" >&2
            exit 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "sortie not ready within 30 s" >&2
            exit 1
        fi
        sleep 0.1
    done
}

# state_sample NAME: saves each workflow's /api/v1/state as $SAMPLES/NAME@<workflow>.json
# (empty when not answered).
state_sample() {
    local w q
    for w in $NAMES; do
        q=""
        [ "$w" = - ] || q="?workflow=$w"
        curl -fsS -m 3 "$BASE/api/v1/state$q" >"$SAMPLES/$1@$w.json" 2>/dev/null || : >"$SAMPLES/$1@$w.json"
    done
}

# proc_sample WHEN: live fake-agent processes grouped by cwd; more than one per cwd is a
# violation.
proc_sample() {
    python3 - "$FAKE" "$1" "$VIOLATIONS" <<'PY'
import os, sys, collections
fake, when, out = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3]
by_cwd = collections.defaultdict(list)
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.path.realpath(f"/proc/{pid}/exe") != fake:
            continue
        by_cwd[os.readlink(f"/proc/{pid}/cwd")].append(pid)
    except OSError:
        continue  # gone, or a zombie
with open(out, "a") as f:
    for cwd, pids in by_cwd.items():
        if len(pids) > 1:
            f.write(f"two_agents\t{when}\t{os.path.basename(cwd)}\tpids={','.join(pids)}\n")
PY
}

# compare_samples BEFORE AFTER WHEN: retry due_at (same issue and attempt) within 1 s, token
# totals not decreasing. Only retries still not due when the AFTER sample was taken are compared:
# one that came due meanwhile may have been rescheduled (no free slot) at the same attempt,
# which moves its due_at legitimately, restart or not.
compare_samples() {
    local w
    for w in $NAMES; do
        compare_sample "$1@$w" "$2@$w" "$3 workflow=$w"
    done
}

compare_sample() {
    python3 - "$SAMPLES/$1.json" "$SAMPLES/$2.json" "$3" "$VIOLATIONS" <<'PY'
import json, sys
from datetime import datetime
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
before, after, when, out = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3], sys.argv[4]
if before is None or after is None:
    sys.exit(0)
def ms(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000
def retries(doc):
    rows = {}
    for r in doc.get("retrying", []):
        issue = r.get("issue_id") or r.get("issue", {}).get("issue_id")
        rows[(issue, r.get("attempt"))] = ms(r["due_at"])
    return rows
rb, ra = retries(before), retries(after)
checked_at = ms(after["generated_at"]) if after.get("generated_at") else None
with open(out, "a") as f:
    for key, due in rb.items():
        if checked_at is not None and due <= checked_at:
            continue
        if key in ra:
            f.write(f"due_at_compared\t{when}\tissue={key[0]} attempt={key[1]}\n")
        if key in ra and abs(ra[key] - due) > 1000:
            f.write(f"due_at_moved\t{when}\tissue={key[0]} attempt={key[1]}\tdelta_ms={ra[key]-due:.0f}\n")
    tb, ta = before.get("agent_totals", {}), after.get("agent_totals", {})
    for k in ("input_tokens", "output_tokens", "total_tokens"):
        if ta.get(k, 0) < tb.get(k, 0):
            f.write(f"totals_decreased\t{when}\t{k}\t{tb.get(k)}->{ta.get(k)}\n")
PY
}

# orphan_sample WHEN: live (not zombie) fake-agent processes while no sortie runs; each one is
# a violation.
orphan_sample() {
    python3 - "$FAKE" "$1" "$VIOLATIONS" <<'PY'
import os, sys
fake, when, out = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3]
alive = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.path.realpath(f"/proc/{pid}/exe") != fake:
            continue
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        if state not in ("Z", "X"):
            alive.append(pid)
    except OSError:
        continue
with open(out, "a") as f:
    f.write(f"orphan_sampled\t{when}\n")
    for pid in alive:
        f.write(f"orphaned\t{when}\tpid={pid}\n")
PY
}

rand_delay() {
    python3 -c 'import random; print(f"{random.uniform(0.5, 3.0):.2f}")'
}

# --- the torture ---------------------------------------------------------------------------
echo "torture dir: $DIR (port $PORT, kills $KILLS, issues $ISSUES, workflows $WORKFLOWS)"
start_daemon
for i in $(seq 1 "$KILLS"); do
    sleep "$(rand_delay)"
    state_sample "before-$i"
    proc_sample "before-kill-$i"
    kill -9 "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
    sleep 1
    orphan_sample "kill-$i"
    start_daemon
    state_sample "after-$i"
    proc_sample "after-restart-$i"
    compare_samples "before-$i" "after-$i" "kill-$i"
    printf '\rkill %d/%d' "$i" "$KILLS"
done
echo

# --- let it finish -------------------------------------------------------------------------
echo "waiting for the backlog to settle (up to ${FINISH_TIMEOUT}s)..."
settled=0
deadline=$((SECONDS + FINISH_TIMEOUT))
while [ "$SECONDS" -lt "$deadline" ]; do
    state_sample final
    proc_sample settle
    if python3 -c '
import json, sys
docs = [json.load(open(p)) for p in sys.argv[1:]]
sys.exit(0 if all(d["counts"]["running"] == 0 and d["counts"]["retrying"] == 0 for d in docs) else 1)
' "$SAMPLES"/final@*.json 2>/dev/null; then
        settled=$((settled + 1))
        [ "$settled" -ge 3 ] && break
    else
        settled=0
    fi
    sleep 1
done
kill -TERM "$DAEMON_PID" 2>/dev/null || true
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=""
sleep 0.5

# Agents still alive after the graceful shutdown, given 3 s to finish exiting (reported with
# their workspace, then killed by pid).
LEFT=$(python3 - "$FAKE" "$DIR/left.log" <<'PY'
import os, sys, time
fake, out = os.path.realpath(sys.argv[1]), sys.argv[2]
def alive():
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.realpath(f"/proc/{pid}/exe") == fake:
                found[pid] = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            pass
    return found
deadline = time.time() + 3
left = alive()
while left and time.time() < deadline:
    time.sleep(0.1)
    left = alive()
with open(out, "w") as f:
    for pid, cwd in left.items():
        f.write(f"pid={pid} workspace={os.path.basename(cwd)}\n")
print(" ".join(left))
PY
)
for pid in $LEFT; do kill -9 "$pid" 2>/dev/null || true; done

INTEGRITY=$(python3 -c '
import sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(";".join(r[0] for r in c.execute("PRAGMA integrity_check")))
' "$DIR/.sortie.db" 2>&1 || true)

# --- the report ----------------------------------------------------------------------------
python3 - "$DIR" "$MAX_SESSIONS" "$settled" "$INTEGRITY" "$LEFT" "$KILLS" <<'PY'
import collections, json, os, sqlite3, sys
d, max_sessions, settled, integrity, left, kills = sys.argv[1:7]
max_sessions, kills = int(max_sessions), int(kills)
def lines(p):
    try:
        return [json.loads(l) for l in open(p) if l.strip()]
    except FileNotFoundError:
        return []
turns = lines(os.path.join(d, "turns.log"))
launches = len(lines(os.path.join(d, "argv.log")))
sessions = collections.defaultdict(set)      # issue -> supervisor sessions seen by agents
finished = collections.defaultdict(set)
for t in turns:
    issue = os.path.basename(t.get("cwd", ""))
    key = t.get("started_at")
    if t.get("phase") == "start":
        sessions[issue].add(key)
    elif t.get("phase") == "end":
        finished[issue].add(key)
db = sqlite3.connect(f"file:{os.path.join(d, '.sortie.db')}?mode=ro", uri=True)
runs = collections.Counter(dict(db.execute(
    "SELECT identifier, COUNT(*) FROM run_history GROUP BY identifier").fetchall()))
statuses = dict(db.execute("SELECT status, COUNT(*) FROM run_history GROUP BY status").fetchall())
lost = {i: len(s) - runs.get(i, 0) for i, s in sessions.items() if len(s) > runs.get(i, 0)}
over = {i: len(s) for i, s in sessions.items() if len(s) > max_sessions}
viol = collections.defaultdict(list)
for l in open(os.path.join(d, "violations.log")):
    kind, rest = l.rstrip("\n").split("\t", 1)
    viol[kind].append(rest)
left_n = len(left.split())
# Every line sortie logged must read back as its text format: `key=value` pairs, a value bare or
# a JSON string, `time`, `level` and `msg` first, each once.
import re
TOKEN = r'(?:[^ ="]+|"(?:[^"\\]|\\.)*")'
PAIR = re.compile(TOKEN + '=' + TOKEN)
bad_lines = []
for n, line in enumerate(open(os.path.join(d, "sortie.log"), errors="replace"), 1):
    line = line.rstrip("\n")
    pairs, pos = [], 0
    while pos < len(line):
        m = PAIR.match(line, pos)
        if not m:
            break
        key = m.group(0).split("=", 1)[0]
        pairs.append(json.loads(key) if key.startswith('"') else key)
        pos = m.end()
        if pos < len(line):
            if line[pos] != " ":
                break
            pos += 1
    keys_ok = pairs[:3] == ["time", "level", "msg"] and all(pairs.count(k) == 1 for k in pairs[:3])
    if pos != len(line) or not keys_ok:
        bad_lines.append(f"{n}: {line[:160]}")
viol["log_unparsed"] = bad_lines
rows = [
    ("kills", kills, ""),
    ("agent launches (argv log)", launches, ""),
    ("agent sessions (turns log)", sum(len(s) for s in sessions.values()), ""),
    ("sessions with a completed turn", sum(len(s) for s in finished.values()), ""),
    ("runs recorded (db)", sum(runs.values()), " ".join(f"{k}={v}" for k, v in sorted(statuses.items()))),
    ("settled at the end", "yes" if int(settled) >= 3 else "no", ""),
    ("runs lost", sum(lost.values()), "FAIL" if lost else "ok"),
    (f"issues with sessions > {max_sessions}", len(over), "FAIL" if over else "ok"),
    ("two agents alive for one issue", len(viol["two_agents"]), "FAIL" if viol["two_agents"] else "ok"),
    ("retries compared across a restart", len(viol["due_at_compared"]), ""),
    ("retry due_at moved > 1 s", len(viol["due_at_moved"]), "FAIL" if viol["due_at_moved"] else "ok"),
    ("served token totals decreased", len(viol["totals_decreased"]), "FAIL" if viol["totals_decreased"] else "ok"),
    ("kills sampled for orphaned agents", len(viol["orphan_sampled"]), ""),
    ("agents alive 1 s after a kill, no sortie", len(viol["orphaned"]), "FAIL" if viol["orphaned"] else "ok"),
    ("log lines not read back as key=value", len(bad_lines), "FAIL" if bad_lines else "ok"),
    ("PRAGMA integrity_check", integrity, "ok" if integrity == "ok" else "FAIL"),
    ("fake agents left at the end", left_n, "FAIL" if left_n else "ok"),
]
w = max(len(r[0]) for r in rows)
print(f"\n{'check'.ljust(w)}  {'value':>10}  result")
print(f"{'-' * w}  {'-' * 10}  ------")
for name, value, result in rows:
    print(f"{name.ljust(w)}  {str(value):>10}  {result}")
def show(title, items):
    if items:
        print(f"\n{title} (first 5 of {len(items)}):")
        for x in list(items)[:5]:
            print(f"  {x}")
try:
    show("fake agents left at the end", open(os.path.join(d, "left.log")).read().split("\n")[:-1])
except FileNotFoundError:
    pass
show("runs lost by issue", [f"{i}: {n}" for i, n in sorted(lost.items())])
show("sessions over the budget", [f"{i}: {n}" for i, n in sorted(over.items())])
for kind in ("two_agents", "due_at_moved", "totals_decreased", "orphaned", "log_unparsed"):
    show(kind, viol[kind])
failed = any(r[2] == "FAIL" for r in rows)
open(os.path.join(d, "result"), "w").write("fail" if failed else "pass")
PY

RESULT=$(cat "$DIR/result")
echo
if [ "$RESULT" = pass ]; then
    echo "all checks passed"
    [ "$KEEP" = 1 ] && echo "kept: $DIR" || rm -rf "$DIR"
    exit 0
fi
echo "violations found; everything is kept in $DIR (sortie.log, turns.log, argv.log, samples/)"
exit 1
