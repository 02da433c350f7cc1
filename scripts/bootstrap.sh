#!/usr/bin/env bash
# Create .venv with everything the example build and the tests need.
# Works on a fresh Debian machine with Python >= 3.10, pip and apt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv 2>/dev/null || {
    # Debian's python3 needs python3-venv for `-m venv`
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    "$PY" -m venv .venv
  }
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# The compiler itself (wheel: console scripts + CMake package) and the test tools.
.venv/bin/python -m pip install -q ".[test]"
