#!/usr/bin/env bash
# Create .venv and install the compiler into it (with `--test`: also the test tools).
# Works on a fresh Debian machine with Python >= 3.10, pip and apt; installs the
# Debian packages it needs (a C/C++ compiler for the host programs, python3-venv; with
# --test also Bazel 4.2.3 and Debian's rules_java and rules_proto for the Bazel tests).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

need_apt=()
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
"$PY" -c "import ensurepip, venv" >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ "${1:-}" = "--test" ]; then
  # Bazel 4.2.3 and the real rules its offline builds use (tests/bazel_support/offline_bazelrc.py)
  command -v bazel >/dev/null 2>&1 || need_apt+=(bazel-bootstrap)
  [ -d /usr/share/bazel/rules/java ] || need_apt+=(bazel-rules-java)
  [ -d /usr/share/bazel/rules/proto ] || need_apt+=(bazel-rules-proto)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null ||
      echo "warning: could not install ${need_apt[*]} with apt-get" >&2
  else
    echo "warning: please install ${need_apt[*]}" >&2
  fi
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if [ "${1:-}" = "--test" ]; then
  .venv/bin/python -m pip install -q ".[test]"
else
  # the compiler (console scripts + CMake package) and the build tools of the example
  .venv/bin/python -m pip install -q . cmake ninja
fi
