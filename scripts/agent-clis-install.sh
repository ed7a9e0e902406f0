#!/usr/bin/env bash
# Installs the real agent CLIs from the npm registry, pinned, into target/agent-clis (never
# globally), for the tests that run them through sortie offline (tests/agent_real_*.rs, which
# fail when a CLI is missing and `CI` is set). Idempotent: an install of the same pins is kept.
# The versions here are the ones the README says were tested.
set -euo pipefail
cd "$(dirname "$0")/.."

pins=(
  "@anthropic-ai/claude-code@2.1.332"
  "@openai/codex@0.171.0"
  "@github/copilot@1.0.102"
  "opencode-ai@1.18.33"
  "@google/gemini-cli@0.61.0"
)
dir=target/agent-clis
stamp="$dir/pins.txt"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${pins[*]}" ]; then
  echo "agent CLIs already installed in $dir"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: install Node.js and npm to run the real-CLI tests" >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$dir"
echo '{"private": true}' > "$dir/package.json"
(cd "$dir" && npm install --no-audit --no-fund --loglevel=error "${pins[@]}")
for cli in claude codex copilot opencode gemini; do
  echo "$cli: $("$dir/node_modules/.bin/$cli" --version 2>&1 | head -1)"
done
echo "${pins[*]}" > "$stamp"
