#!/usr/bin/env bash
# Installs schemathesis (from PyPI) into target/schemathesis, a Python venv, for
# tests/api_fidelity_openapi_fuzz.rs. Idempotent: an existing install is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/schemathesis
if [ -x "$venv/bin/schemathesis" ] && "$venv/bin/schemathesis" --version >/dev/null 2>&1; then
  echo "schemathesis already installed in $venv"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check 'schemathesis==4.32.5'
"$venv/bin/schemathesis" --version
