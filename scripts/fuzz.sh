#!/usr/bin/env bash
# Runs every fuzz target of the module for a while each: scripts/fuzz.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-30s}
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $target ($dur)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$dur" "$pkg"
  done
done
