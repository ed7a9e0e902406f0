#!/usr/bin/env bash
# Offline smoke test of the sortie image, with no container engine: checks the image's config
# and files (scripts/lib/oci_image.py check), unpacks its root filesystem with umoci, and runs
# `sortie demo` from it under bubblewrap as the image's user, with nothing of the host's file
# system bound in (only the unpacked root, plus fresh /proc and /dev), in new user, PID, IPC, UTS
# and cgroup namespaces; sortie is PID 1, as in a container. Sharing the host's network lets the
# checks reach the demo on 127.0.0.1 (scripts/lib/smoke_demo.py: /livez, dashboard, metrics, a
# session whose hooks ran with the image's /bin/sh, exit 0 after SIGTERM).
# Usage: scripts/image-smoke.sh [IMAGE]   an OCI archive or layout holding one image
#                                         (default dist/sortie-image-linux-amd64.oci.tar)
# Installs Debian's umoci and bubblewrap when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/release-meta.sh

IMAGE=${1:-dist/sortie-image-linux-amd64.oci.tar}
need=()
command -v umoci >/dev/null 2>&1 || need+=(umoci)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
apt_install "${need[@]}"

VERSION=$(cargo_field version)
SOURCE=$(repository_url)
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
open_image "$IMAGE" "$WORK"
echo "== image config and files ($IMAGE, $IMAGE_TAG)"
python3 scripts/lib/oci_image.py check "$IMAGE_LAYOUT" "$IMAGE_TAG" \
  --version "$VERSION" --source "$SOURCE" --revision "$REVISION"
echo "== umoci unpack"
umoci unpack --image "$IMAGE_LAYOUT:$IMAGE_TAG" "$WORK/bundle" >/dev/null
ROOTFS="$WORK/bundle/rootfs"
# bwrap runs as the image's user and must reach the root it binds. As a container runtime
# does, create the mount points the image lacks (/proc, /dev) in the unpacked root.
chmod 0755 "$WORK" "$WORK/bundle"
mkdir -p "$ROOTFS/proc" "$ROOTFS/dev"

# The process the image describes (umoci writes it to the bundle's config.json): its user,
# environment, working directory and entrypoint; `demo ...` replaces the default command, as
# `docker run IMAGE demo ...` would.
read -r UID_ GID_ CWD ENTRY < <(python3 - "$WORK/bundle/config.json" "$IMAGE_LAYOUT" "$IMAGE_TAG" <<'PY'
import json, sys
sys.path.insert(0, "scripts/lib")
import oci_image
p = json.load(open(sys.argv[1]))["process"]
m = oci_image.manifest(sys.argv[2], sys.argv[3])
cfg = json.loads(oci_image.blob(sys.argv[2], m["config"]["digest"]))["config"]
assert len(cfg["Entrypoint"]) == 1, cfg["Entrypoint"]
print(p["user"]["uid"], p["user"]["gid"], p["cwd"], cfg["Entrypoint"][0])
PY
)
ENVS=()
while IFS= read -r kv; do ENVS+=(--setenv "${kv%%=*}" "${kv#*=}"); done < <(
  python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["process"]["env"]))' \
    "$WORK/bundle/config.json")

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "== sortie demo from the image's root filesystem under bwrap (uid $UID_, port $PORT)"
python3 scripts/lib/smoke_demo.py --port "$PORT" --log "$WORK/sortie.log" \
  --expect-glob "$ROOTFS/data/demo/workspaces/*/NOTES.md" \
  -- setpriv --reuid "$UID_" --regid "$GID_" --clear-groups \
  bwrap --unshare-all --share-net --as-pid-1 --die-with-parent --new-session \
  --bind "$ROOTFS" / --proc /proc --dev /dev \
  --clearenv "${ENVS[@]}" --setenv SORTIE_PRICE_TABLE_FETCH off --chdir "$CWD" \
  -- "$ENTRY" demo --host 0.0.0.0 --port "$PORT" --dir /data/demo
