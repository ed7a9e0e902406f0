#!/usr/bin/env bash
# Installs the pinned vendor conformance checker (tools/vendor-check: Prism's HTTP validator and
# graphql-js, from the npm registry) into target/vendor-check with `npm ci`, for
# tests/common/vendor_check.rs, which checks every exchange of the Gitea, GitLab, Jira and Linear
# fakes against the vendors' own descriptions in tools/vendor-specs. Idempotent: when the
# installed lock file equals the pinned one and both packages are there, it does nothing.
#
# `--stop` instead stops the checker that the tests left running for later test processes
# (recorded in target/vendor-check-run/server as "pid port fingerprint").
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--stop" ]; then
  record=target/vendor-check-run/server
  [ -f "$record" ] || exit 0
  read -r pid _ < "$record" || true
  if [ -n "${pid:-}" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q check.js; then
    kill "$pid" && echo "vendor-check-install: stopped the checker (pid $pid)"
  fi
  rm -f "$record"
  exit 0
fi

src=tools/vendor-check
dest=target/vendor-check
want=("$dest/node_modules/@stoplight/prism-http/package.json" "$dest/node_modules/graphql/package.json")

if [ -f "${want[0]}" ] && [ -f "${want[1]}" ] && cmp -s "$src/package-lock.json" "$dest/package-lock.json"; then
  echo "vendor-check-install: up to date ($dest)"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "vendor-check-install: npm not found; installing Debian nodejs npm" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error)

for f in "${want[@]}"; do
  if [ ! -e "$f" ]; then
    echo "vendor-check-install: $f missing after npm ci" >&2
    exit 1
  fi
done
echo "vendor-check-install: installed prism-http $(node -p "require('./$dest/node_modules/@stoplight/prism-http/package.json').version") and graphql $(node -p "require('./$dest/node_modules/graphql/package.json').version") into $dest"
