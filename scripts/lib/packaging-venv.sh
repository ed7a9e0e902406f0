#!/usr/bin/env bash
# Creates target/packaging-venv (Python venv) with the PyPI tools the packaging checks use,
# pinned, and prints its python. Idempotent, and safe to run from several processes at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/packaging-venv
pins=("kubernetes-validate==1.37.0")
stamp="$venv/pins.txt"
# Test processes call this at the same time: one creates the venv while the others wait.
mkdir -p target
exec 9>target/packaging-venv.lock
flock 9
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" >&2
  echo "${pins[*]}" > "$stamp"
fi
echo "$PWD/$venv/bin/python"
