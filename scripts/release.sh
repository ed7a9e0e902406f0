#!/usr/bin/env bash
# Lays out a release in dist/, file names as the GitHub release carries them (unversioned, so
# .../releases/latest/download/NAME always names the newest):
#   sortie-x86_64-unknown-linux-musl.tar.gz  the static binary (and README.md)
#   sortie-image-linux-amd64.oci.tar         the container image (OCI archive: `podman load -i`,
#                                            `skopeo copy oci-archive:... docker://...`)
#   sortie.cdx.json                          SBOM, CycloneDX JSON, from Cargo.lock (cargo-cyclonedx)
#   install.sh                               scripts/install.sh
#   sortie.rb                                the Homebrew formula (packaging/homebrew/sortie.rb with
#                                            this release's version, URL and SHA-256)
#   SHA256SUMS                               sha256sum format, every file above
# Archives are reproducible: file times come from SOURCE_DATE_EPOCH or the last commit.
# Usage: scripts/release.sh [--binary PATH] [--out DIR]
#   --binary  the static sortie (default target/x86_64-unknown-linux-musl/release/sortie,
#             built with scripts/build-static.sh when missing)
#   --out     default dist
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/release-meta.sh

CYCLONEDX_VERSION=0.5.9
BIN=target/$RELEASE_TARGET/release/sortie
OUT=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) BIN=${2:?--binary needs a path}; shift 2 ;;
    --out) OUT=${2:?--out needs a directory}; shift 2 ;;
    *) echo "usage: scripts/release.sh [--binary PATH] [--out DIR]" >&2; exit 2 ;;
  esac
done
if [ ! -x "$BIN" ]; then
  [ "$BIN" = "target/$RELEASE_TARGET/release/sortie" ] || { echo "error: $BIN is not an executable" >&2; exit 1; }
  scripts/build-static.sh
fi

VERSION=$(binary_version "$BIN")
REPO=$(repository_url)
EPOCH=$(source_date_epoch)
installer_repo=$(sed -n 's/^REPOSITORY=${SORTIE_REPOSITORY:-\(.*\)}$/\1/p' scripts/install.sh)
if [ "$installer_repo" != "$(cargo_field repository)" ]; then
  echo "error: scripts/install.sh downloads from $installer_repo, Cargo.toml names $(cargo_field repository)" >&2
  exit 1
fi
echo "== release $VERSION of $REPO into $OUT/"
rm -rf "$OUT"
mkdir -p "$OUT"

# The binary archive: flat, fixed owner and times, no gzip timestamp.
TARBALL="sortie-$RELEASE_TARGET.tar.gz"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
install -m 0755 "$BIN" "$STAGE/sortie"
install -m 0644 README.md "$STAGE/README.md"
tar -C "$STAGE" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
  -cf - sortie README.md | gzip -9n > "$OUT/$TARBALL"

# The SBOM of the shipped binary (the crates it is built from for the release target, build
# dependencies included: they compile the bundled SQLite), by the CycloneDX project's own cargo
# plugin, pinned. It writes one file per binary beside Cargo.toml; only sortie ships. A debug
# build of the plugin: it compiles in less than half the time and runs once on a small graph.
if ! cargo install --list --root target/tools 2>/dev/null | grep -qx "cargo-cyclonedx v$CYCLONEDX_VERSION:"; then
  echo "== cargo install cargo-cyclonedx $CYCLONEDX_VERSION"
  cargo install --quiet --debug --locked --version "$CYCLONEDX_VERSION" --root target/tools \
    cargo-cyclonedx
fi
echo "== SBOM"
rm -f ./*_bin.cdx.json
PATH="$PWD/target/tools/bin:$PATH" cargo cyclonedx --format json --spec-version 1.5 \
  --target "$RELEASE_TARGET" --describe binaries >/dev/null
mv sortie_bin.cdx.json "$OUT/sortie.cdx.json"
rm -f ./*_bin.cdx.json
python3 scripts/lib/sbom_check.py "$OUT/sortie.cdx.json" "$VERSION"

# The image, built from the same binary.
scripts/image-build.sh --binary "$BIN" --out target/image
cp "target/image/sortie-image-$VERSION.oci.tar" "$OUT/sortie-image-linux-amd64.oci.tar"

install -m 0755 scripts/install.sh "$OUT/install.sh"

# The formula names the archive by its release URL and checksum.
sha=$(sha256sum "$OUT/$TARBALL" | awk '{print $1}')
url="$REPO/releases/download/v$VERSION/$TARBALL"
{
  echo "# sortie $VERSION; written by scripts/release.sh from packaging/homebrew/sortie.rb."
  sed -n -e "s|@VERSION@|$VERSION|g" -e "s|@HOMEPAGE@|$REPO|g" \
    -e "s|@URL_X86_64_LINUX@|$url|g" -e "s|@SHA256_X86_64_LINUX@|$sha|g" \
    -e '/^class /,$p' packaging/homebrew/sortie.rb
} > "$OUT/sortie.rb"
if grep -n '@[A-Z0-9_]*@' "$OUT/sortie.rb"; then
  echo "error: placeholders left in $OUT/sortie.rb" >&2
  exit 1
fi

find "$OUT" -exec touch -h -d "@$EPOCH" {} +
(cd "$OUT" && files=() && for f in *; do [ "$f" = SHA256SUMS ] || files+=("$f"); done \
  && sha256sum -- "${files[@]}" > SHA256SUMS.new && mv SHA256SUMS.new SHA256SUMS)
echo "== $OUT/"
(cd "$OUT" && ls -l --time-style=+ | tail -n +2 && cat SHA256SUMS)
