#!/usr/bin/env bash
# Runs the relay benchmark against our server and the Node reference in
# one command; extra arguments go to bench/load (see go run ./bench/load -h).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d bench/reference/node_modules/socket.io ]; then
  (cd bench/reference && npm ci --no-audit --no-fund --loglevel=error)
fi
go run ./bench/load "$@"
