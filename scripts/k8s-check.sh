#!/usr/bin/env bash
# Checks examples/k8s offline: the manifests against the Kubernetes API schema
# (kubernetes-validate from PyPI, pinned, strict: unknown fields fail), against each other and
# the image (scripts/lib/k8s_check.py static), and by running the pod from the image's root
# filesystem under bubblewrap as the kubelet would (scripts/lib/k8s_check.py run).
# `kubectl apply --dry-run=client` is no offline check: even a client-side dry run asks an API
# server for its resource list first.
# Usage: scripts/k8s-check.sh [IMAGE]   an OCI archive or layout of the sortie image
#                                       (default dist/sortie-image-linux-amd64.oci.tar)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/release-meta.sh

IMAGE_PATH=${1:-dist/sortie-image-linux-amd64.oci.tar}
VERSION=$(cargo_field version)
IMAGE="$(image_name):$VERSION"
PY=$(scripts/lib/packaging-venv.sh)

echo "== kubernetes-validate --strict"
"$(dirname "$PY")/kubernetes-validate" --strict --quiet \
  examples/k8s/sortie.yaml examples/k8s/secret.example.yaml examples/k8s/agent-jobs-rbac.yaml
echo "k8s check: schema valid (kubernetes-validate $("$(dirname "$PY")/kubernetes-validate" --version), strict)"
"$PY" scripts/lib/k8s_check.py static examples/k8s "$IMAGE"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
open_image "$IMAGE_PATH" "$WORK"
umoci unpack --image "$IMAGE_LAYOUT:$IMAGE_TAG" "$WORK/bundle" >/dev/null
chmod 0755 "$WORK" "$WORK/bundle"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PY" scripts/lib/k8s_check.py run examples/k8s "$WORK/bundle/rootfs" "$PORT"
