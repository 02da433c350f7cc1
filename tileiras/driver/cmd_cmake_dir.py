"""`tileir cmake-dir`: print the directory holding TileIRConfig.cmake.

    cmake -S . -B build -DTileIR_DIR="$(tileir cmake-dir)"

An installed wheel keeps the CMake package in tileiras/cmake_prefix/lib/cmake/TileIR;
a source checkout keeps it in <repo>/cmake. Exit 4 when neither is there.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import ExitCode, TileirasError

CONFIG_FILE = "TileIRConfig.cmake"
USAGE = "usage: tileir cmake-dir\n\nPrint the directory that holds TileIRConfig.cmake (for -DTileIR_DIR=...)."


def candidates() -> list[Path]:
    """Where the CMake package may be, installed layout first."""
    package = Path(__file__).resolve().parent.parent
    return [package / "cmake_prefix" / "lib" / "cmake" / "TileIR", package.parent / "cmake"]


def cmake_dir() -> Path:
    for directory in candidates():
        if (directory / CONFIG_FILE).is_file():
            return directory
    looked = ", ".join(str(d) for d in candidates())
    raise TileirasError(f"error: {CONFIG_FILE} not found (looked in {looked}); reinstall tileiras",
                        ExitCode.UNREADABLE)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv:
        print(f"tileir cmake-dir: error: unexpected argument '{argv[0]}'\n{USAGE}", file=sys.stderr)
        return int(ExitCode.INVALID_OPTIONS)
    try:
        print(cmake_dir())
    except TileirasError as exc:
        print(f"tileir cmake-dir: {exc.message}", file=sys.stderr)
        return int(exc.code)
    return 0
