#!/usr/bin/env bash
# Runs the relay benchmark against our server and the Node reference in
# one command, beside a raw WebSocket forwarder (no Socket.IO) at every
# agents level, whose CPU per call is the floor ("CPU ×raw" column); extra
# arguments go to bench/a2c/load (see go run ./bench/a2c/load -h).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d bench/a2c/reference/node_modules/socket.io ]; then
  (cd bench/a2c/reference && npm ci --no-audit --no-fund --loglevel=error)
fi
go run ./bench/a2c/load "$@"
