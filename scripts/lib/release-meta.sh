# shellcheck shell=bash disable=SC2034
# Shared by the packaging scripts (sourced, run from the repository root): what a release is
# called and where it lives, read from Cargo.toml and the built binary so there is one source
# for each fact.

# The static target every release artefact is built for.
RELEASE_TARGET=x86_64-unknown-linux-musl

# Installs Debian packages when any are named and missing (as root, or with sudo).
apt_install() {
  [ $# -gt 0 ] || return 0
  local sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "== apt-get install $*"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# A Cargo.toml [package] string field.
cargo_field() {
  sed -n "/^\[package\]/,/^\[/s/^$1 *= *\"\(.*\)\"/\1/p" Cargo.toml | head -1
}

# The version the binary reports (`sortie 0.1.0 (linux/x86_64)` -> 0.1.0); fails when it
# disagrees with Cargo.toml, so a stale binary is never released under a new version.
binary_version() {
  local banner v
  banner=$("$1" --version)
  v=$(echo "$banner" | awk '{print $2}')
  if [ "$v" != "$(cargo_field version)" ]; then
    echo "error: $1 reports '$banner' but Cargo.toml says $(cargo_field version)" >&2
    return 1
  fi
  echo "$v"
}

# https://github.com/OWNER/NAME, from Cargo.toml's repository (SORTIE_REPOSITORY overrides).
repository_url() {
  local url=${SORTIE_REPOSITORY:-$(cargo_field repository)}
  case "$url" in
    https://github.com/*/*) echo "${url%/}" ;;
    *) echo "error: repository '$url' is not https://github.com/OWNER/NAME" >&2; return 1 ;;
  esac
}

# ghcr.io/owner/name (lower case, as registries require).
image_name() {
  local url
  url=$(repository_url)
  echo "ghcr.io/${url#https://github.com/}" | tr '[:upper:]' '[:lower:]'
}

# Seconds since the epoch for file times and the image's creation date: SOURCE_DATE_EPOCH, or
# the last commit's time, so rebuilding the same commit yields the same bytes.
source_date_epoch() {
  if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    echo "$SOURCE_DATE_EPOCH"
  else
    git log -1 --format=%ct 2>/dev/null || echo 0
  fi
}

# Opens an image given as an OCI layout directory or an OCI archive (unpacked under DIR): sets
# IMAGE_LAYOUT and IMAGE_TAG (the one image's ref name).
open_image() { # PATH DIR
  if [ -d "$1" ]; then
    IMAGE_LAYOUT=$1
  else
    IMAGE_LAYOUT="$2/layout"
    mkdir -p "$IMAGE_LAYOUT"
    tar -xf "$1" -C "$IMAGE_LAYOUT"
  fi
  IMAGE_TAG=$(python3 scripts/lib/oci_image.py tag "$IMAGE_LAYOUT")
}
