# find_package(TileIR CONFIG): the tileiras compiler for CMake projects.
#
# Found three ways, all with the same result:
#   * from an installed wheel:   cmake -DTileIR_DIR="$(tileir cmake-dir)" ...
#   * from scikit-build-core:    automatic, through the wheel's `cmake.prefix` entry point
#   * from a source checkout:    cmake -DTileIR_DIR=<repo>/cmake -DTileIR_PYTHON=<python with the deps> ...
#
# Provides add_tileir_kernel() (documented in TileIR.cmake) and sets
#   TileIR_FOUND, TileIR_VERSION, TileIR_ROOT (where the tileiras and build_rules
#   packages live), TileIR_PYTHON, TileIR_TILEIRAS_COMMAND, TileIR_TILEIR_COMMAND,
#   TileIR_SUPPORTED_GPU_NAMES.
#
# Cache variables a user may set:
#   TileIR_PYTHON     the Python that runs the compiler. Default: the Python of the
#                     environment the package is installed in, else Python_EXECUTABLE /
#                     Python3_EXECUTABLE, else the active virtualenv's, else python3 on PATH;
#                     the first that can import the compiler and its dependencies wins.
#   TileIR_COMPILER   a `tileiras` executable to run instead of the packaged one, with
#   TileIR_TILEIR     its `tileir` (default: the `tileir` beside TileIR_COMPILER).
#   TILEIR_GPU_NAMES  default GPU_NAMES of add_tileir_kernel() (default: sm_90).
#   TileIR_CACHE_SERVER  run build actions through the compile-cache client and server
#                     (default ON; Unix, not cross-compiling): a warm-cache action then
#                     costs a fork instead of a Python start-up. Outputs are the same either way.
#
# Needs CMake 3.20 (custom-command DEPFILE support in Makefile generators).

if(CMAKE_VERSION VERSION_LESS 3.20)
  set(TileIR_FOUND FALSE)
  set(TileIR_NOT_FOUND_MESSAGE
      "TileIR needs CMake 3.20 or newer (DEPFILE for custom commands with Makefile generators); this is CMake ${CMAKE_VERSION}")
  return()
endif()

cmake_policy(PUSH)
cmake_policy(VERSION 3.20...4.1)
include("${CMAKE_CURRENT_LIST_DIR}/TileIR.cmake")
_tileir_find_toolchain("${CMAKE_CURRENT_LIST_DIR}")
cmake_policy(POP)

get_property(_tileir_error GLOBAL PROPERTY TILEIR_TOOLCHAIN_ERROR)
if(_tileir_error)
  set(TileIR_FOUND FALSE)
  set(TileIR_NOT_FOUND_MESSAGE "${_tileir_error}")
else()
  # Directory-scoped copies of the facts the functions keep in global properties.
  foreach(_tileir_var IN ITEMS VERSION ROOT PYTHON TILEIRAS_COMMAND TILEIR_COMMAND SUPPORTED_GPU_NAMES)
    get_property(TileIR_${_tileir_var} GLOBAL PROPERTY TILEIR_${_tileir_var})
  endforeach()
  unset(_tileir_var)
  set(TileIR_FOUND TRUE)
endif()
unset(_tileir_error)
