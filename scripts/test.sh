#!/usr/bin/env bash
# The whole test suite: unit tests, integration tests (real binary, real SQLite files, real
# subprocesses, HTTP on 127.0.0.1). Uses cargo-nextest when installed, else cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
if cargo nextest --version >/dev/null 2>&1; then
  # nextest does not run doc tests; run them first so the suite's summary closes the output.
  cargo test --doc --quiet
  cargo nextest run --lib --bins --tests --no-fail-fast "$@"
else
  cargo test --lib --bins --tests --no-fail-fast "$@"
fi
