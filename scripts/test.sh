#!/usr/bin/env bash
# The whole test suite: unit tests, integration tests (real binary, real SQLite files, real
# subprocesses, HTTP on 127.0.0.1, promtool, headless Chromium). Uses cargo-nextest when
# installed, else cargo test. Doc tests are not run: the crate's examples live in tests/, and a
# doc-test pass would cost a full extra compilation for nothing. The vendored tiny_http's own
# unit tests run too (it is a patch, not a workspace member, so a plain run would skip them).
set -euo pipefail
cd "$(dirname "$0")/.."
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --lib --bins --tests --no-fail-fast "$@"
else
  cargo test --lib --bins --tests --no-fail-fast "$@"
fi
cargo test -p tiny_http --lib --no-fail-fast
