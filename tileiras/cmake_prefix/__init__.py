"""The CMake package prefix of tileiras (the wheel's `cmake.prefix` entry point).

The wheel installs TileIRConfig.cmake and its module under
lib/cmake/TileIR/ in this directory, so scikit-build-core projects that
build-require tileiras find it with `find_package(TileIR CONFIG)` and no
extra settings. `tileir cmake-dir` prints that directory for other projects.
"""
