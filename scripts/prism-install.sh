#!/usr/bin/env bash
# Installs the pinned Prism mock server and GitHub's OpenAPI description (tools/prism) into
# target/prism with `npm ci`, for tests/tracker_github_openapi.rs. Idempotent: when the installed
# lock file equals the pinned one and both entry points exist, it does nothing.
#
# `--stop` instead stops the Prism that tests/common/prism.rs left running for later test
# processes (recorded in target/prism-run/server as "pid port fingerprint").
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--stop" ]; then
  record=target/prism-run/server
  [ -f "$record" ] || exit 0
  read -r pid _ < "$record" || true
  if [ -n "${pid:-}" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q prism; then
    kill "$pid" && echo "prism-install: stopped Prism (pid $pid)"
  fi
  rm -f "$record"
  exit 0
fi

src=tools/prism
dest=target/prism
doc="$dest/node_modules/@octokit/openapi/generated/api.github.com.json"
bin="$dest/node_modules/.bin/prism"

if [ -x "$bin" ] && [ -f "$doc" ] && cmp -s "$src/package-lock.json" "$dest/package-lock.json"; then
  echo "prism-install: up to date ($dest)"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "prism-install: npm not found; installing Debian nodejs npm" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error)

for f in "$bin" "$doc"; do
  if [ ! -e "$f" ]; then
    echo "prism-install: $f missing after npm ci" >&2
    exit 1
  fi
done
echo "prism-install: installed $(cd "$dest" && node -p 'require("@stoplight/prism-cli/package.json").version' 2>/dev/null || echo '?') into $dest"
