#!/usr/bin/env bash
# Smoke run of a built sortie binary on the embedded demo, as a new user would start it:
# `sortie demo` in an empty directory on a free port. Passes when the daemon serves /livez, the
# dashboard and /metrics, runs a demo session (hooks and a first agent turn), and exits 0 after
# SIGTERM drains it (scripts/lib/smoke_demo.py has the checks).
# Usage: scripts/smoke-demo.sh path/to/sortie
set -euo pipefail
BIN=$(realpath "${1:?usage: scripts/smoke-demo.sh path/to/sortie}")
HERE=$(dirname "$0")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$HERE/lib/smoke_demo.py" --port "$PORT" --log "$WORK/sortie.log" \
  --expect-glob "$WORK/demo/workspaces/*/NOTES.md" \
  -- "$BIN" demo --dir "$WORK/demo" --port "$PORT"
