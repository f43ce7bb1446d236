#!/usr/bin/env bash
# Refreshes the terminal emulator aiod's /terminal page embeds
# (aiod/pty/web/vendor) from the pinned npm packages, and records their
# sha256 sums in aiod/pty/web/vendor/SHA256SUMS, which aiod/pty's
# TestVendoredXterm checks the embedded files against.
#
#   scripts/xterm.sh          fetch the pinned versions and rewrite the files
#   scripts/xterm.sh --check  fetch them and fail if the files differ
#
# To move to a new version, change a pin below and run the script.
set -euo pipefail

XTERM_VERSION=6.0.0    # @xterm/xterm
FIT_VERSION=0.11.0     # @xterm/addon-fit

cd "$(dirname "$0")/.."
dest=aiod/pty/web/vendor
check=false
[ "${1:-}" = "--check" ] && check=true

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@xterm/xterm@$XTERM_VERSION" "@xterm/addon-fit@$FIT_VERSION" >/dev/null)
mkdir -p "$tmp/xterm" "$tmp/fit" "$tmp/out/xterm" "$tmp/out/addon-fit"
tar -xzf "$tmp/xterm-xterm-$XTERM_VERSION.tgz" -C "$tmp/xterm"
tar -xzf "$tmp/xterm-addon-fit-$FIT_VERSION.tgz" -C "$tmp/fit"

# The files the page loads, with each package's LICENSE beside them.
cp "$tmp/xterm/package/lib/xterm.js" "$tmp/xterm/package/css/xterm.css" "$tmp/xterm/package/LICENSE" "$tmp/out/xterm/"
cp "$tmp/fit/package/lib/addon-fit.js" "$tmp/fit/package/LICENSE" "$tmp/out/addon-fit/"

integrity() { sha512sum "$1" | cut -d" " -f1; }
{
  echo "# @xterm/xterm@$XTERM_VERSION tarball-sha512 $(integrity "$tmp/xterm-xterm-$XTERM_VERSION.tgz")"
  echo "# @xterm/addon-fit@$FIT_VERSION tarball-sha512 $(integrity "$tmp/xterm-addon-fit-$FIT_VERSION.tgz")"
  (cd "$tmp/out" && sha256sum xterm/LICENSE xterm/xterm.css xterm/xterm.js addon-fit/LICENSE addon-fit/addon-fit.js)
} >"$tmp/out/SHA256SUMS"

if $check; then
  diff -r "$tmp/out" "$dest" && echo "xterm.sh: $dest matches @xterm/xterm@$XTERM_VERSION and @xterm/addon-fit@$FIT_VERSION"
  exit
fi
rm -rf "$dest"
mkdir -p "$dest"
cp -r "$tmp/out/." "$dest/"
echo "xterm.sh: $dest now holds @xterm/xterm@$XTERM_VERSION and @xterm/addon-fit@$FIT_VERSION"
