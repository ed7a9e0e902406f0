#!/usr/bin/env bash
# Builds the sortie container image from Containerfile without a container daemon: buildah
# (Debian) with the vfs storage driver in a private store under target/image, so nothing
# outside the repository is touched and no engine has to run. The Containerfile has no RUN
# step, so no runtime is needed either. Writes
#   OUT/oci/                          an OCI image layout (tag = version)
#   OUT/sortie-image-VERSION.oci.tar  the same as an OCI archive (`docker load`/`podman load`)
# and prints the image's size against the binary's; fails when the image is more than 1 MiB
# larger than the binary.
# Usage: scripts/image-build.sh [--binary PATH] [--out DIR] [--name NAME] [--stage-only]
#   --binary  the static sortie (default target/x86_64-unknown-linux-musl/release/sortie,
#             built with scripts/build-static.sh when missing)
#   --out     output directory (default target/image)
#   --name    image name without tag (default ghcr.io/OWNER/sortie from Cargo.toml's repository)
#   --stage-only  stage the build context (OUT/context) and print the `docker build` command
#                 that builds the same image, instead of building it
# Installs Debian's buildah, mksh and ca-certificates when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/release-meta.sh

BIN=target/x86_64-unknown-linux-musl/release/sortie
OUT=target/image
NAME=
STAGE_ONLY=
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) BIN=${2:?--binary needs a path}; shift 2 ;;
    --out) OUT=${2:?--out needs a directory}; shift 2 ;;
    --name) NAME=${2:?--name needs a name}; shift 2 ;;
    --stage-only) STAGE_ONLY=1; shift ;;
    *) echo "usage: scripts/image-build.sh [--binary PATH] [--out DIR] [--name NAME] [--stage-only]" >&2; exit 2 ;;
  esac
done

MKSH=/usr/lib/x86_64-linux-musl/bin/mksh
CA=/etc/ssl/certs/ca-certificates.crt
need=()
[ -n "$STAGE_ONLY" ] || command -v buildah >/dev/null 2>&1 || need+=(buildah)
[ -x "$MKSH" ] || need+=(mksh)
[ -f "$CA" ] || need+=(ca-certificates)
command -v file >/dev/null 2>&1 || need+=(file)
apt_install "${need[@]}"

if [ ! -x "$BIN" ]; then
  if [ "$BIN" = target/x86_64-unknown-linux-musl/release/sortie ]; then
    scripts/build-static.sh
  else
    echo "error: $BIN is not an executable" >&2
    exit 1
  fi
fi
for f in "$BIN" "$MKSH"; do
  case "$(file -b "$f")" in
    *"statically linked"* | *"static-pie linked"*) ;;
    *) echo "error: $f is not statically linked: $(file -b "$f")" >&2; exit 1 ;;
  esac
done

VERSION=$(binary_version "$BIN")
SOURCE=$(repository_url)
NAME=${NAME:-$(image_name)}
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
EPOCH=$(source_date_epoch)
CREATED=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
echo "== image $NAME:$VERSION (revision $REVISION, source $SOURCE)"

# The build context: exactly the files the image holds, with their modes.
CTX="$OUT/context"
rm -rf "$CTX"
mkdir -p "$CTX/rootfs/usr/local/bin" "$CTX/rootfs/bin" "$CTX/rootfs/etc/ssl/certs" \
  "$CTX/rootfs/usr/share/doc/mksh" "$CTX/rootfs/usr/share/doc/ca-certificates" \
  "$CTX/rootfs/tmp" "$CTX/data"
install -m 0755 "$BIN" "$CTX/rootfs/usr/local/bin/sortie"
install -m 0755 "$MKSH" "$CTX/rootfs/bin/sh"
install -m 0644 packaging/container/passwd packaging/container/group "$CTX/rootfs/etc/"
install -m 0644 "$CA" "$CTX/rootfs/etc/ssl/certs/ca-certificates.crt"
install -m 0644 /usr/share/doc/mksh/copyright "$CTX/rootfs/usr/share/doc/mksh/copyright"
install -m 0644 /usr/share/doc/ca-certificates/copyright \
  "$CTX/rootfs/usr/share/doc/ca-certificates/copyright"
chmod 1777 "$CTX/rootfs/tmp"
chmod 0755 "$CTX/data"
find "$CTX" -exec touch -h -d "@$EPOCH" {} +
if [ -n "$STAGE_ONLY" ]; then
  echo "context staged in $CTX; build it with:"
  echo "  docker build -f Containerfile -t $NAME:$VERSION --build-arg VERSION=$VERSION" \
    "--build-arg REVISION=$REVISION --build-arg SOURCE=$SOURCE --build-arg CREATED=$CREATED $CTX"
  exit 0
fi

STORE="$OUT/storage"
buildah_() {
  buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs "$@"
}
buildah_ rmi --force "$NAME:$VERSION" >/dev/null 2>&1 || true
echo "== buildah bud (vfs, no daemon)"
buildah_ bud --quiet --format oci --timestamp "$EPOCH" \
  --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" \
  --build-arg "SOURCE=$SOURCE" --build-arg "CREATED=$CREATED" \
  -t "$NAME:$VERSION" -f Containerfile "$CTX" >/dev/null

rm -rf "$OUT/oci"
ARCHIVE="$OUT/sortie-image-$VERSION.oci.tar"
rm -f "$ARCHIVE"
buildah_ push --quiet "$NAME:$VERSION" "oci:$OUT/oci:$VERSION"
buildah_ push --quiet "$NAME:$VERSION" "oci-archive:$ARCHIVE:$NAME:$VERSION"
# The archive is a tar of an OCI layout; repack it with fixed times and owners so the same
# commit yields the same bytes (the image's digest already is).
repack="$OUT/repack"
rm -rf "$repack"
mkdir -p "$repack"
tar -xf "$ARCHIVE" -C "$repack"
tar -C "$repack" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
  -cf "$ARCHIVE" blobs index.json oci-layout
rm -rf "$repack"
# The store only served this build: the layout and the archive are the results.
buildah_ rmi --force "$NAME:$VERSION" >/dev/null 2>&1 || true

python3 scripts/lib/oci_image.py size "$OUT/oci" "$VERSION" "$BIN"
echo "image layout: $OUT/oci ($VERSION)"
echo "image archive: $ARCHIVE ($(stat -c %s "$ARCHIVE") bytes)"
