#!/usr/bin/env bash
# The main job: build examples/cmake (TileIR kernels -> PTX -> cubin -> host
# object -> C++ program) with CMake and Ninja, then run the program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
cmake -S examples/cmake -B build/example -G Ninja -DTileIR_DIR="$(tileir cmake-dir)"
cmake --build build/example
build/example/vector_ops
