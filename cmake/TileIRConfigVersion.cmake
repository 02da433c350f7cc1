# Version check for find_package(TileIR [version] CONFIG).
#
# The version is read from tileiras/__init__.py, which sits beside this file
# in a source checkout (<repo>/cmake -> <repo>/tileiras) and four levels up
# in an installed wheel (tileiras/cmake_prefix/lib/cmake/TileIR -> tileiras).
# Compatibility: same major version (same minor while the major is 0), and
# not older than what was asked for; version ranges are honoured.

set(PACKAGE_VERSION "0.0.0")
foreach(_tileir_init IN ITEMS
    "${CMAKE_CURRENT_LIST_DIR}/../tileiras/__init__.py"
    "${CMAKE_CURRENT_LIST_DIR}/../../../../__init__.py")
  if(EXISTS "${_tileir_init}")
    file(STRINGS "${_tileir_init}" _tileir_line REGEX "^__version__ *= *")
    if(_tileir_line MATCHES "\"([0-9]+(\\.[0-9]+)*)")
      set(PACKAGE_VERSION "${CMAKE_MATCH_1}")
      break()
    endif()
  endif()
endforeach()
unset(_tileir_init)
unset(_tileir_line)

set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
string(REGEX MATCH "^[0-9]+" _tileir_major "${PACKAGE_VERSION}")
string(REGEX MATCH "^[0-9]+\\.[0-9]+" _tileir_major_minor "${PACKAGE_VERSION}")

if(NOT DEFINED PACKAGE_FIND_VERSION OR PACKAGE_FIND_VERSION STREQUAL "")
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION_RANGE)
  # A range: min[...max]; the whole range counts, like CMake's own helpers.
  if(PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION_MIN
     AND ((PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "INCLUDE" AND PACKAGE_VERSION VERSION_LESS_EQUAL PACKAGE_FIND_VERSION_MAX)
          OR (PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "EXCLUDE" AND PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION_MAX)))
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
elseif(PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION)
  if(_tileir_major STREQUAL "0" AND PACKAGE_FIND_VERSION_COUNT GREATER 1)
    if("${PACKAGE_FIND_VERSION_MAJOR}.${PACKAGE_FIND_VERSION_MINOR}" STREQUAL _tileir_major_minor)
      set(PACKAGE_VERSION_COMPATIBLE TRUE)
    endif()
  elseif(PACKAGE_FIND_VERSION_MAJOR STREQUAL _tileir_major)
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
unset(_tileir_major)
unset(_tileir_major_minor)

# The host objects are 64-bit (x86_64 or aarch64): a 32-bit build cannot link them.
if(DEFINED CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P STREQUAL "" AND NOT CMAKE_SIZEOF_VOID_P EQUAL 8)
  set(PACKAGE_VERSION "${PACKAGE_VERSION} (64-bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
