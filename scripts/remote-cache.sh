#!/usr/bin/env bash
# Start the shared build cache: a BuildGrid REAPI server (CAS + ActionCache) on
# loopback, configured by scripts/remote-cache.yml. Bazel and tileiras then share it:
#
#   bash scripts/remote-cache.sh [PORT [DIR [SECONDS]]]     # default 50051, ~/.cache/tileiras-remote, 8 hours
#   bazel build --remote_cache=grpc://127.0.0.1:50051 //...
#   TILEIRAS_REMOTE_CACHE=grpc://127.0.0.1:50051 ninja       # or -DTileIR_REMOTE_CACHE=...
#
# Runs in the foreground and stops after SECONDS (or Ctrl-C). Blobs live in DIR/cas;
# action results are in memory (see the .yml for a persistent setup). Needs
# `pip install buildgrid` (in .[test]; scripts/bootstrap.sh --test installs it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export TILEIRAS_REMOTE_PORT="${1:-50051}"
dir="${2:-${XDG_CACHE_HOME:-$HOME/.cache}/tileiras-remote}"
export TILEIRAS_REMOTE_DIR="$(mkdir -p "$dir" && cd "$dir" && pwd)"
seconds="${3:-28800}"
bgd="${BGD:-$(command -v bgd || echo "$here/../.venv/bin/bgd")}"
if [ ! -x "$bgd" ]; then
  echo "remote-cache.sh: BuildGrid's bgd not found; run: .venv/bin/pip install 'buildgrid>=0.4.4'" >&2
  exit 1
fi
echo "remote cache: grpc://127.0.0.1:$TILEIRAS_REMOTE_PORT (blobs in $TILEIRAS_REMOTE_DIR/cas, stops after ${seconds}s)" >&2
exec timeout --foreground "$seconds" "$bgd" server start "$here/remote-cache.yml"
