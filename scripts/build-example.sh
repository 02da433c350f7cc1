#!/usr/bin/env bash
# The main job: build examples/cmake (TileIR kernels -> PTX -> cubin -> host
# object -> C++ program) with CMake and Ninja, then run the program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
cmake -S examples/cmake -B build/example -G Ninja -DTileIR_DIR="$(tileir cmake-dir)"
cmake --build build/example
find build/example -maxdepth 2 -type f -perm -u+x -name 'tileir_example*' -exec {} \;
