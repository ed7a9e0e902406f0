#!/usr/bin/env bash
# The release artefacts, built and checked offline from an already built static binary (no
# container engine, no network beyond the package registries for the tools):
#   1. scripts/release.sh       dist/: archive, SBOM, image (buildah, vfs), install.sh, formula,
#                               SHA256SUMS; fails when the image exceeds the binary by > 1 MiB
#   2. scripts/image-smoke.sh   the image's config and files; the demo from its root filesystem
#                               under bubblewrap
#   3. scripts/install-test.sh  install.sh against a local GitHub-like release server, tampering
#                               refused
#   4. the Homebrew formula     `ruby -c`, then its install and test blocks on the release archive
#                               (scripts/lib/brew_formula_check.rb)
#   5. scripts/k8s-check.sh     schema, consistency, and the pod run from the image
#   6. examples/container       agent images and compose.yaml checked against the pins and the
#                               image; the compose workflow passes `sortie validate`
# Usage: scripts/package-test.sh [--binary PATH]   (default: the scripts/build-static.sh output)
# Installs what it needs from Debian (buildah, umoci, bubblewrap, mksh, ruby, ...), PyPI
# (kubernetes-validate) and crates.io (cargo-cyclonedx), pinned where the registry allows.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/release-meta.sh
started=$(date +%s)

BIN=target/$RELEASE_TARGET/release/sortie
if [ "${1:-}" = --binary ]; then BIN=${2:?--binary needs a path}; fi
if [ ! -x "$BIN" ]; then
  echo "error: $BIN is missing: build it with scripts/build-static.sh" >&2
  exit 1
fi

need=()
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v umoci >/dev/null 2>&1 || need+=(umoci)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
[ -x /usr/lib/x86_64-linux-musl/bin/mksh ] || need+=(mksh)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
command -v ruby >/dev/null 2>&1 || need+=(ruby)
command -v dash >/dev/null 2>&1 || need+=(dash)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v file >/dev/null 2>&1 || need+=(file)
apt_install "${need[@]}"

VERSION=$(binary_version "$BIN")

echo "== release"
scripts/release.sh --binary "$BIN"

echo "== image smoke"
scripts/image-smoke.sh dist/sortie-image-linux-amd64.oci.tar

echo "== install.sh"
scripts/install-test.sh dist

echo "== Homebrew formula"
ruby -c packaging/homebrew/sortie.rb
ruby -c dist/sortie.rb
ruby scripts/lib/brew_formula_check.rb dist/sortie.rb dist "$VERSION"

echo "== Kubernetes example"
scripts/k8s-check.sh dist/sortie-image-linux-amd64.oci.tar

echo "== container examples"
PY=$(scripts/lib/packaging-venv.sh)
out=$("$PY" scripts/lib/container_examples_check.py "$(image_name):$VERSION")
echo "$out" | head -n -1
workflow=$(echo "$out" | tail -1)
# Validated as the agent image would run it: not root (IS_SANDBOX stands in for that here), the
# credentials set, the agent CLI on PATH (a stand-in: validate only looks it up).
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
printf '#!/bin/sh\nexit 0\n' > "$stub/claude"
chmod +x "$stub/claude"
env -i PATH="$stub:/usr/bin:/bin" HOME="$stub" IS_SANDBOX=1 GITHUB_TOKEN=placeholder \
  ANTHROPIC_API_KEY=placeholder "$BIN" validate "$workflow"
echo "container examples: $workflow passes sortie validate"

echo "packaging checks passed in $(( $(date +%s) - started )) s"
