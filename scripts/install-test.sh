#!/usr/bin/env bash
# Tests scripts/install.sh against a release served on 127.0.0.1, laid out as GitHub serves one
# (OWNER/NAME/releases/download/vVERSION/ and OWNER/NAME/releases/latest/download/), no network:
#   - the latest release and a named version install, under dash (POSIX sh), and print the version;
#   - a tampered SHA256SUMS, a tampered archive, a SHA256SUMS without the archive and a missing
#     release are refused, and nothing is installed;
#   - another OS or CPU gets a clear message.
# Every case fails the script loudly with what it saw.
# Usage: scripts/install-test.sh [DIST]   (default dist, from scripts/release.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/release-meta.sh

DIST=$(realpath "${1:-dist}")
VERSION=$(cargo_field version)
ASSET="sortie-$RELEASE_TARGET.tar.gz"
if [ ! -f "$DIST/$ASSET" ] || [ ! -f "$DIST/SHA256SUMS" ]; then
  echo "error: no release in $DIST (scripts/release.sh)" >&2
  exit 1
fi
command -v dash >/dev/null 2>&1 || apt_install dash
command -v curl >/dev/null 2>&1 || apt_install curl

WORK=$(mktemp -d)
SERVER=
cleanup() {
  [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Three servers' worth of trees under one root: good, tampered sums, tampered archive.
ROOT="$WORK/www"
release_tree() { # NAME -> a GitHub-like tree for repository owner/NAME with dist/ as the release
  local base="$ROOT/owner/$1/releases"
  mkdir -p "$base/download/v$VERSION" "$base/latest"
  cp "$DIST"/* "$base/download/v$VERSION/"
  ln -s "../download/v$VERSION" "$base/latest/download"
  echo "$base/download/v$VERSION"
}
release_tree good >/dev/null
dir=$(release_tree badsums)
# Flip the archive's checksum's first hex digit.
python3 - "$dir/SHA256SUMS" "$ASSET" <<'PY'
import sys
path, asset = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
out = []
for l in lines:
    digest, name = l.split(None, 1)
    if name.lstrip("*") == asset:
        digest = ("1" if digest[0] != "1" else "2") + digest[1:]
    out.append(f"{digest}  {name}")
open(path, "w").write("\n".join(out) + "\n")
PY
dir=$(release_tree badarchive)
printf 'x' >> "$dir/$ASSET"
dir=$(release_tree nosum)
grep -v " $ASSET\$" "$dir/SHA256SUMS" > "$dir/SHA256SUMS.new" && mv "$dir/SHA256SUMS.new" "$dir/SHA256SUMS"

python3 - "$ROOT" "$WORK/port" <<'PY' &
import functools, http.server, os, sys
root, port_file = sys.argv[1], sys.argv[2]
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=root))
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
PY
SERVER=$!
for _ in $(seq 1 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
[ -s "$WORK/port" ] || { echo "install-test: the release server did not start" >&2; exit 1; }
URL="http://127.0.0.1:$(cat "$WORK/port")/owner"

failures=0
fail() { echo "install-test: FAIL: $*" >&2; failures=$((failures + 1)); }

# CASE NAME EXPECT(ok|refused) MESSAGE-PATTERN -- ENV... -- ARGS...
run_case() {
  local name=$1 expect=$2 pattern=$3; shift 4
  local envs=() prefix="$WORK/prefix-$name"
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local rc=0
  env "${envs[@]}" PATH="$WORK/stub:$PATH" dash scripts/install.sh --prefix "$prefix" "$@" \
    >"$WORK/$name.out" 2>&1 || rc=$?
  local out
  out=$(cat "$WORK/$name.out")
  if [ "$expect" = ok ]; then
    if [ $rc -ne 0 ]; then fail "$name: exit $rc: $out"; return; fi
    local v
    v=$("$prefix/bin/sortie" --version 2>&1 || true)
    case "$v" in "sortie $VERSION "*) ;; *) fail "$name: installed binary says '$v'"; return ;; esac
  else
    if [ $rc -eq 0 ]; then fail "$name: accepted, expected a refusal: $out"; return; fi
    if [ -e "$prefix/bin/sortie" ]; then fail "$name: refused but installed $prefix/bin/sortie"; return; fi
  fi
  if ! grep -Eq "$pattern" "$WORK/$name.out"; then fail "$name: output lacks /$pattern/: $out"; return; fi
  echo "install-test: ok: $name"
}

mkdir -p "$WORK/stub"
run_case latest ok "checksum ok.*|sortie $VERSION \(linux/" -- SORTIE_REPOSITORY="$URL/good" --
run_case version ok "releases/download/v$VERSION/$ASSET" -- SORTIE_REPOSITORY="$URL/good" -- --version "v$VERSION"
run_case base-url ok "sortie $VERSION \(linux/" -- -- --base-url "$URL/good/releases/latest/download/"
run_case tampered-sums refused "checksum mismatch for $ASSET" -- SORTIE_REPOSITORY="$URL/badsums" --
run_case tampered-archive refused "checksum mismatch for $ASSET" -- SORTIE_REPOSITORY="$URL/badarchive" --
run_case no-sum refused "SHA256SUMS lists no checksum for $ASSET" -- SORTIE_REPOSITORY="$URL/nosum" --
run_case missing-release refused "could not download .*/v9.9.9/" -- SORTIE_REPOSITORY="$URL/good" -- --version 9.9.9
printf '#!/bin/sh\ncase "$1" in -s) echo Linux ;; -m) echo aarch64 ;; *) exec /bin/uname "$@" ;; esac\n' > "$WORK/stub/uname"
chmod +x "$WORK/stub/uname"
run_case arm64 refused "aarch64-unknown-linux-musl" -- SORTIE_REPOSITORY="$URL/good" --
printf '#!/bin/sh\ncase "$1" in -s) echo Darwin ;; -m) echo arm64 ;; *) exec /bin/uname "$@" ;; esac\n' > "$WORK/stub/uname"
run_case macos refused "no prebuilt sortie for Darwin.*cargo install" -- SORTIE_REPOSITORY="$URL/good" --
rm "$WORK/stub/uname"

if [ $failures -ne 0 ]; then
  echo "install-test: $failures case(s) failed" >&2
  exit 1
fi
echo "install-test: all cases passed"
