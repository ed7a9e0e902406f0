#!/bin/sh
# Installs the sortie binary from a GitHub release: picks the archive for this OS and CPU,
# checks it against the release's SHA256SUMS, installs it to PREFIX/bin and prints the version.
#
#   curl -fsSL https://github.com/sortie-rs/sortie/releases/latest/download/install.sh | sh
#   sh install.sh [--version 0.1.0] [--prefix DIR] [--base-url URL]
#
#   --version   a release (default: the latest)                  env SORTIE_VERSION
#   --prefix    install to PREFIX/bin (default /usr/local as root, ~/.local otherwise)
#                                                                env SORTIE_PREFIX
#   --base-url  the directory holding the release's files, for mirrors and tests (default
#               https://github.com/sortie-rs/sortie/releases/latest/download, or
#               .../releases/download/vVERSION with --version)  env SORTIE_BASE_URL
#   env SORTIE_REPOSITORY  a GitHub-style server in place of github.com/sortie-rs/sortie (tests)
#
# The checksum proves the download is the file the release lists, not who made the release:
# it is fetched from the same place. Nothing is installed when it does not match.
# POSIX sh: runs under dash, busybox ash and bash. Needs curl or wget, tar, gzip, and sha256sum
# or shasum or openssl.
set -eu

REPOSITORY=${SORTIE_REPOSITORY:-https://github.com/sortie-rs/sortie}

usage() {
  cat <<'USAGE'
Installs sortie from a GitHub release, checking the release's SHA256SUMS.
usage: install.sh [--version 0.1.0] [--prefix DIR] [--base-url URL]
  --version   a release (default: the latest)                        env SORTIE_VERSION
  --prefix    install to PREFIX/bin (default /usr/local as root, ~/.local otherwise)
                                                                      env SORTIE_PREFIX
  --base-url  the directory holding the release's files (mirrors, tests)
                                                                      env SORTIE_BASE_URL
USAGE
}
say() { printf 'install.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

version=${SORTIE_VERSION:-}
prefix=${SORTIE_PREFIX:-}
base_url=${SORTIE_BASE_URL:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --version) [ $# -ge 2 ] || die "--version needs a value"; version=$2; shift 2 ;;
    --version=*) version=${1#*=}; shift ;;
    --prefix) [ $# -ge 2 ] || die "--prefix needs a value"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --base-url) [ $# -ge 2 ] || die "--base-url needs a value"; base_url=$2; shift 2 ;;
    --base-url=*) base_url=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
version=${version#v}

# The release archive for this machine.
target() {
  os=$(uname -s)
  arch=$(uname -m)
  case "$os" in
    Linux) ;;
    *) die "no prebuilt sortie for $os; on macOS build from source: cargo install --locked --git $REPOSITORY sortie" ;;
  esac
  case "$arch" in
    x86_64 | amd64) echo x86_64-unknown-linux-musl ;;
    aarch64 | arm64) echo aarch64-unknown-linux-musl ;;
    *) die "no prebuilt sortie for the $arch CPU; build from source: cargo install --locked --git $REPOSITORY sortie" ;;
  esac
}

fetch() { # URL FILE
  # An https URL may not be redirected to plain http.
  case "$1" in https://*) proto='=https' ;; *) proto='=https,http' ;; esac
  if command -v curl >/dev/null 2>&1; then
    curl --proto "$proto" --proto-redir "$proto" -fsSL --retry 2 --connect-timeout 15 \
      --max-time 300 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -T 60 -O "$2" "$1"
  else
    die "neither curl nor wget is installed"
  fi
}

sha256() { # FILE -> hex digest
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | awk '{print $1}'
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | awk '{print $1}'
  elif command -v openssl >/dev/null 2>&1; then
    openssl dgst -sha256 -r "$1" | awk '{print $1}'
  else
    die "no SHA-256 tool (sha256sum, shasum or openssl) is installed"
  fi
}

main() {
  triple=$(target)
  asset="sortie-$triple.tar.gz"
  if [ -z "$base_url" ]; then
    if [ -n "$version" ]; then
      base_url="$REPOSITORY/releases/download/v$version"
    else
      base_url="$REPOSITORY/releases/latest/download"
    fi
  fi
  base_url=${base_url%/}
  if [ -z "$prefix" ]; then
    if [ "$(id -u)" = 0 ]; then prefix=/usr/local; else prefix="$HOME/.local"; fi
  fi

  tmp=$(mktemp -d 2>/dev/null || mktemp -d -t sortie-install)
  trap 'rm -rf "$tmp"' EXIT INT TERM

  say "downloading $base_url/$asset"
  fetch "$base_url/SHA256SUMS" "$tmp/SHA256SUMS" || die "could not download $base_url/SHA256SUMS"
  fetch "$base_url/$asset" "$tmp/$asset" \
    || die "could not download $base_url/$asset (is there a release for $triple?)"

  expected=$(awk -v f="$asset" '$2 == f || $2 == "*" f {print $1}' "$tmp/SHA256SUMS")
  [ -n "$expected" ] || die "SHA256SUMS lists no checksum for $asset"
  [ "$(printf '%s\n' "$expected" | wc -l)" -eq 1 ] || die "SHA256SUMS lists $asset more than once"
  actual=$(sha256 "$tmp/$asset")
  if [ "$actual" != "$expected" ]; then
    die "checksum mismatch for $asset: expected $expected, got $actual; nothing installed"
  fi
  say "checksum ok ($actual)"

  mkdir "$tmp/unpacked"
  tar -xzf "$tmp/$asset" -C "$tmp/unpacked" sortie || die "$asset holds no sortie binary"
  if [ -n "$version" ]; then
    got=$("$tmp/unpacked/sortie" --version | awk '{print $2}')
    [ "$got" = "$version" ] || die "$asset is sortie $got, not $version"
  fi

  mkdir -p "$prefix/bin" || die "cannot create $prefix/bin"
  # Copy then rename, so a running sortie keeps its file and no half-written one is ever run.
  cp "$tmp/unpacked/sortie" "$prefix/bin/.sortie.new" || die "cannot write to $prefix/bin"
  chmod 0755 "$prefix/bin/.sortie.new"
  mv -f "$prefix/bin/.sortie.new" "$prefix/bin/sortie"
  say "installed $prefix/bin/sortie"
  "$prefix/bin/sortie" --version
  case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) say "note: $prefix/bin is not on your PATH" ;;
  esac
}

main
