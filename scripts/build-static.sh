#!/usr/bin/env bash
# Builds a fully static sortie binary (x86_64-unknown-linux-musl, release profile: LTO,
# one codegen unit, stripped), checks that it is static, and prints its path and size.
# Installs Debian's musl-tools and the rustup target when they are missing.
# Usage: scripts/build-static.sh            -> target/x86_64-unknown-linux-musl/release/sortie
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=x86_64-unknown-linux-musl

if ! command -v musl-gcc >/dev/null 2>&1; then
  echo "== installing musl-tools"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq musl-tools file >/dev/null
fi
if ! rustup target list --installed | grep -qx "$TARGET"; then
  echo "== adding rustup target $TARGET"
  rustup target add "$TARGET"
fi

# The bundled SQLite and the TLS crate compile C code: build it with musl's compiler wrapper.
# Linking stays with rustc's self-contained musl CRT, which yields a static-pie binary.
export CC_x86_64_unknown_linux_musl=musl-gcc
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=+crt-static"

echo "== cargo build --release --target $TARGET --bin sortie"
cargo build --release --locked --target "$TARGET" --bin sortie

BIN="target/$TARGET/release/sortie"
# The release profile already strips; strip again in case a local profile override does not.
strip "$BIN" 2>/dev/null || true

desc=$(file -b "$BIN")
echo "file: $desc"
case "$desc" in
  *"statically linked"* | *"static-pie linked"*) ;;
  *) echo "error: $BIN is not statically linked" >&2; exit 1 ;;
esac
# ldd says "not a dynamic executable" (static) or "statically linked" (static-pie).
ldd_out=$(ldd "$BIN" 2>&1 || true)
case "$ldd_out" in
  *"not a dynamic executable"* | *"statically linked"*) ;;
  *) echo "error: ldd lists dynamic dependencies:" >&2; echo "$ldd_out" >&2; exit 1 ;;
esac
echo "ldd: $(echo "$ldd_out" | tr -s '\n\t' '  ')"

"$BIN" --version
bytes=$(stat -c %s "$BIN")
echo "static binary: $BIN"
echo "size: $bytes bytes ($(( (bytes + 524288) / 1048576 )) MiB)"
