# add_tileir_kernel(): TileIR kernels as a CMake library target.
#
#   add_tileir_kernel(<target>
#     SOURCES <files...>          # TileIR bytecode (.tileirbc, .tileir) or text (.mlir)
#     [GPU_NAMES <sm_XX>...]      # default: ${TILEIR_GPU_NAMES}, else sm_90
#     [OPT_LEVEL 0|1|2|3]         # default 3 (0 with DEVICE_DEBUG)
#     [LINEINFO] [DEVICE_DEBUG]
#     [STATIC | OBJECT]           # default STATIC
#     [HEADER <name.h>])          # default <target>.h
#
# `target_link_libraries(app PRIVATE <target>)` then links the launchers,
# puts the generated header on app's include path and adds ${CMAKE_DL_LIBS}.
#
# Each source is its own chain of custom commands (the actions come from the
# build_rules package, which Bazel uses too):
#   source -> <stem>.<gpu>.ptx (+ launch metadata, + depfile)  per GPU
#          -> <stem>.<gpu>.cubin                                per GPU
#          -> <stem>.o   host object: fatbin + one C launcher per kernel
# and the header is made from every source's metadata (on Unix the commands go
# through the compile-cache client, build_rules/client.c, unless
# TileIR_CACHE_SERVER is OFF: see build_rules/README.md). All of it lives in
# ${CMAKE_CURRENT_BINARY_DIR}/tileir/<target>/. Every command depends on the
# compiler (a stamp that changes with its files) and on the target's options,
# so an upgrade of the compiler, or new options for one target, rebuild
# exactly what they affect, with Ninja and with Makefiles alike.
# -DTileIR_REMOTE_CACHE=grpc://HOST:PORT shares the compile cache through a
# REAPI server with other machines and Bazel builds (tileiras/cache/remote.py;
# TileIR_REMOTE_CACHE_READ_ONLY=ON to only read).
#
# The library also compiles one generated file that includes the header, so
# the header is checked by the C/C++ compiler and generated with every build
# of the target. Target properties TILEIR_HEADER, TILEIR_OBJECTS and
# TILEIR_INCLUDE_DIR name the generated files.
#
# Arguments are checked when add_tileir_kernel() is called; the commands are
# planned in one batch per directory when the directory's CMakeLists.txt has
# been read (cmake_language(DEFER)), so a project of many kernel targets
# starts the planner once per directory instead of once per target.

include_guard(GLOBAL)

set(_TILEIR_KEYWORD_HELP "SOURCES, GPU_NAMES, OPT_LEVEL, LINEINFO, DEVICE_DEBUG, STATIC, OBJECT, HEADER")
set(_TILEIR_HEADER_SUFFIXES ".h;.hpp")

# Write `content` to `path` only when it differs, so timestamps move only on change.
function(_tileir_write_if_changed path content)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL content)
    file(WRITE "${path}" "${content}")
  endif()
endfunction()

function(_tileir_json_string out value)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  string(REPLACE "\t" "\\t" value "${value}")
  set(${out} "\"${value}\"" PARENT_SCOPE)
endfunction()

function(_tileir_json_list out)
  set(items "")
  foreach(value IN LISTS ARGN)
    _tileir_json_string(quoted "${value}")
    list(APPEND items "${quoted}")
  endforeach()
  list(JOIN items ", " joined)
  set(${out} "[${joined}]" PARENT_SCOPE)
endfunction()

function(_tileir_bool out value)
  if(value)
    set(${out} "true" PARENT_SCOPE)
  else()
    set(${out} "false" PARENT_SCOPE)
  endif()
endfunction()

# Runs build_rules with `python`; on success sets `<out_rc>` to 0, else to the
# exit code with the error text in `<out_err>`.
function(_tileir_run_build_rules python out_rc out_err)
  get_property(launcher GLOBAL PROPERTY TILEIR_LAUNCHER)
  execute_process(
    COMMAND "${python}" "${launcher}" build_rules ${ARGN}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  string(STRIP "${err}" err)
  if(NOT rc STREQUAL "0" AND err STREQUAL "")
    set(err "exited with '${rc}'")
  endif()
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_err} "${err}" PARENT_SCOPE)
endfunction()

# Locates the compiler and the Python that runs it, once per configure run.
# Results go to global properties (TILEIR_*); a failure to TILEIR_TOOLCHAIN_ERROR.
function(_tileir_find_toolchain config_dir)
  get_property(done GLOBAL PROPERTY TILEIR_TOOLCHAIN_DONE)
  if(done)
    return()
  endif()
  set_property(GLOBAL PROPERTY TILEIR_TOOLCHAIN_DONE TRUE)

  # The package root holds tileiras/ and build_rules/: <repo> for a source
  # checkout (<repo>/cmake), site-packages for a wheel (tileiras/cmake_prefix/lib/cmake/TileIR).
  get_filename_component(dir "${config_dir}" REALPATH)
  if(EXISTS "${dir}/../build_rules/launch.py")
    get_filename_component(root "${dir}/.." ABSOLUTE)
  elseif(EXISTS "${dir}/../../../../../build_rules/launch.py")
    get_filename_component(root "${dir}/../../../../.." ABSOLUTE)
  else()
    set_property(GLOBAL PROPERTY TILEIR_TOOLCHAIN_ERROR
      "TileIR: the package at ${dir} is incomplete: no build_rules/launch.py beside it; reinstall tileiras")
    return()
  endif()
  set_property(GLOBAL PROPERTY TILEIR_LAUNCHER "${root}/build_rules/launch.py")

  # Candidate Pythons, best first.
  set(candidates "")
  if(TileIR_PYTHON)
    list(APPEND candidates "${TileIR_PYTHON}")
  else()
    if(root MATCHES "^(.*)/lib/python[0-9.]+/site-packages$")
      list(APPEND candidates "${CMAKE_MATCH_1}/bin/python3" "${CMAKE_MATCH_1}/bin/python")
    elseif(root MATCHES "^(.*)/Lib/site-packages$")
      list(APPEND candidates "${CMAKE_MATCH_1}/Scripts/python.exe" "${CMAKE_MATCH_1}/python.exe")
    endif()
    foreach(var IN ITEMS Python_EXECUTABLE Python3_EXECUTABLE)
      if(${var})
        list(APPEND candidates "${${var}}")
      endif()
    endforeach()
    if(DEFINED ENV{VIRTUAL_ENV})
      list(APPEND candidates "$ENV{VIRTUAL_ENV}/bin/python3" "$ENV{VIRTUAL_ENV}/Scripts/python.exe")
    endif()
    find_program(_TILEIR_PATH_PYTHON NAMES python3 python)
    if(_TILEIR_PATH_PYTHON)
      list(APPEND candidates "${_TILEIR_PATH_PYTHON}")
    endif()
    unset(_TILEIR_PATH_PYTHON CACHE)
  endif()
  list(REMOVE_DUPLICATES candidates)

  set(check "")
  if(TileIR_COMPILER)
    set(check "--no-check")  # the Python only plans; the given executables compile
  endif()
  set(state_dir "${CMAKE_BINARY_DIR}/CMakeFiles/TileIR")
  set(facts "${state_dir}/toolchain.cmake")
  file(MAKE_DIRECTORY "${state_dir}")
  set(python "")
  set(failures "")
  foreach(candidate IN LISTS candidates)
    if(NOT EXISTS "${candidate}" OR IS_DIRECTORY "${candidate}")
      if(TileIR_PYTHON)
        string(APPEND failures "\n  ${candidate}: no such file")
      endif()
      continue()
    endif()
    _tileir_run_build_rules("${candidate}" rc err toolchain --format=cmake --python "${candidate}" ${check} -o "${facts}")
    if(rc STREQUAL "0")
      set(python "${candidate}")
      break()
    endif()
    string(APPEND failures "\n  ${candidate}: ${err}")
  endforeach()
  if(python STREQUAL "")
    if(failures STREQUAL "")
      set(failures "\n  (no Python found)")
    endif()
    set_property(GLOBAL PROPERTY TILEIR_TOOLCHAIN_ERROR
      "TileIR: no Python can run the compiler at ${root}:${failures}\nSet TileIR_PYTHON to a Python that has tileiras' dependencies (pip install <tileiras checkout>).")
    return()
  endif()
  set(TileIR_PYTHON "${python}" CACHE FILEPATH "The Python that runs the TileIR compiler")

  include("${facts}")
  set(compiler_depends "")
  if(TileIR_COMPILER)
    # A compiler of the user's: run it directly; it is itself the dependency.
    set(tileir "${TileIR_TILEIR}")
    if(NOT tileir)
      get_filename_component(bin "${TileIR_COMPILER}" DIRECTORY)
      set(tileir "${bin}/tileir${CMAKE_EXECUTABLE_SUFFIX}")
    endif()
    foreach(tool IN ITEMS "${TileIR_COMPILER}" "${tileir}")
      if(NOT EXISTS "${tool}")
        set_property(GLOBAL PROPERTY TILEIR_TOOLCHAIN_ERROR
          "TileIR: '${tool}' does not exist (from TileIR_COMPILER / TileIR_TILEIR)")
        return()
      endif()
    endforeach()
    set(TileIR_TILEIRAS_COMMAND "${TileIR_COMPILER}")
    set(TileIR_TILEIR_COMMAND "${tileir}")
    set(compiler_depends "${TileIR_COMPILER}" "${tileir}")
  else()
    # The packaged compiler: one stamp whose content is a digest of its files.
    # The stamp is rewritten only when the digest changes, and CMake re-runs
    # when any compiler file changes, so an upgrade rebuilds every kernel once.
    _tileir_write_if_changed("${state_dir}/compiler.stamp" "${TileIR_COMPILER_FINGERPRINT}\n")
    set(compiler_depends "${state_dir}/compiler.stamp")
    set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TileIR_COMPILER_FILES})
    # Actions go through the cache client when it can be built: a warm-cache
    # action then costs a fork of the cache server instead of a Python start-up.
    # The socket's name stands for the compiler and the Python that runs it: a
    # new compiler (or Python) gets a new server.
    set(TileIR_CACHE_SERVER ON CACHE BOOL "Run TileIR build actions through the compile-cache client and server")
    if(TileIR_CACHE_SERVER)
      _tileir_build_client("${root}/build_rules/client.c" "${state_dir}" client)
      if(client)
        string(SHA256 server_id "${TileIR_COMPILER_FINGERPRINT}\n${python}\n${root}")
        string(SUBSTRING "${server_id}" 0 16 server_id)
        set_property(GLOBAL PROPERTY TILEIR_CLIENT_PREFIX "${client}" "${state_dir}/server-${server_id}.sock")
      endif()
    endif()
  endif()

  foreach(name IN ITEMS VERSION ROOT SUPPORTED_GPU_NAMES DEFAULT_GPU_NAMES OPT_LEVELS SOURCE_SUFFIXES
                        TILEIRAS_COMMAND TILEIR_COMMAND)
    set_property(GLOBAL PROPERTY TILEIR_${name} "${TileIR_${name}}")
  endforeach()
  set_property(GLOBAL PROPERTY TILEIR_PYTHON "${python}")
  set_property(GLOBAL PROPERTY TILEIR_COMPILER_DEPENDS "${compiler_depends}")
endfunction()

# Compiles the cache client (build_rules/client.c) into `state_dir` with the
# project's C or C++ compiler, once per change of its source or compiler;
# sets `out_var` to the executable, or to "" where there is none to be had
# (no Unix host, cross-compiling, no C/C++, a failed compile): then actions
# run Python directly, which is slower on a warm cache but otherwise the same.
function(_tileir_build_client source state_dir out_var)
  set(${out_var} "" PARENT_SCOPE)
  if(NOT CMAKE_HOST_UNIX OR CMAKE_CROSSCOMPILING OR CMAKE_TRY_COMPILE_TARGET_TYPE STREQUAL "STATIC_LIBRARY"
     OR NOT EXISTS "${source}")
    return()
  endif()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("C" IN_LIST languages)
    set(lang C)
    set(ext c)
  elseif("CXX" IN_LIST languages)
    set(lang CXX)
    set(ext cpp)
  else()
    return()
  endif()
  set(client "${state_dir}/tileir-client")
  file(SHA256 "${source}" digest)
  set(stamp "${digest} ${CMAKE_${lang}_COMPILER}\n")
  if(EXISTS "${client}" AND EXISTS "${client}.stamp")
    file(READ "${client}.stamp" old)
    if(old STREQUAL stamp)
      set(${out_var} "${client}" PARENT_SCOPE)
      return()
    endif()
  endif()
  file(REMOVE "${client}" "${client}.stamp")
  configure_file("${source}" "${state_dir}/client/tileir_client.${ext}" COPYONLY)
  try_compile(built "${state_dir}/client/build" "${state_dir}/client/tileir_client.${ext}"
              COPY_FILE "${client}" OUTPUT_VARIABLE log)
  if(built AND EXISTS "${client}")
    file(WRITE "${client}.stamp" "${stamp}")
    set(${out_var} "${client}" PARENT_SCOPE)
  else()
    message(STATUS "TileIR: the cache client did not compile; build actions start Python directly")
  endif()
endfunction()

function(_tileir_fail where message)
  message(FATAL_ERROR "${where}: ${message}")
endfunction()

function(add_tileir_kernel target)
  set(where "add_tileir_kernel(${target})")
  get_property(ready GLOBAL PROPERTY TILEIR_TOOLCHAIN_DONE)
  get_property(toolchain_error GLOBAL PROPERTY TILEIR_TOOLCHAIN_ERROR)
  if(NOT ready OR toolchain_error)
    _tileir_fail("${where}" "TileIR was not found; call find_package(TileIR CONFIG REQUIRED) first. ${toolchain_error}")
  endif()

  cmake_parse_arguments(PARSE_ARGV 1 arg "LINEINFO;DEVICE_DEBUG;STATIC;OBJECT" "OPT_LEVEL;HEADER" "SOURCES;GPU_NAMES")
  if(arg_UNPARSED_ARGUMENTS)
    list(JOIN arg_UNPARSED_ARGUMENTS " " unknown)
    _tileir_fail("${where}" "unknown argument(s) '${unknown}'; expected ${_TILEIR_KEYWORD_HELP}")
  endif()
  if(arg_KEYWORDS_MISSING_VALUES)
    list(JOIN arg_KEYWORDS_MISSING_VALUES " " missing)
    _tileir_fail("${where}" "${missing} needs a value")
  endif()
  # cmake_parse_arguments files a misspelt keyword under the list before it.
  foreach(value IN LISTS arg_SOURCES arg_GPU_NAMES)
    if(value MATCHES "^[A-Z][A-Z0-9_]*$" AND NOT value MATCHES "^SM_")
      _tileir_fail("${where}" "unknown keyword '${value}'; expected ${_TILEIR_KEYWORD_HELP}")
    endif()
  endforeach()
  if(TARGET "${target}")
    _tileir_fail("${where}" "a target named '${target}' already exists")
  endif()
  if(arg_STATIC AND arg_OBJECT)
    _tileir_fail("${where}" "STATIC and OBJECT exclude each other")
  endif()

  # GPU names
  get_property(supported GLOBAL PROPERTY TILEIR_SUPPORTED_GPU_NAMES)
  set(gpus "${arg_GPU_NAMES}")
  set(gpu_origin "GPU_NAMES")
  if(NOT gpus AND TILEIR_GPU_NAMES)
    set(gpus "${TILEIR_GPU_NAMES}")
    set(gpu_origin "TILEIR_GPU_NAMES")
  endif()
  if(NOT gpus)
    get_property(gpus GLOBAL PROPERTY TILEIR_DEFAULT_GPU_NAMES)
  endif()
  list(JOIN supported " " supported_text)
  set(seen "")
  foreach(gpu IN LISTS gpus)
    if(NOT gpu IN_LIST supported)
      _tileir_fail("${where}" "unknown GPU name '${gpu}' in ${gpu_origin}; supported: ${supported_text}")
    endif()
    if(gpu IN_LIST seen)
      _tileir_fail("${where}" "GPU name '${gpu}' is listed twice")
    endif()
    list(APPEND seen "${gpu}")
  endforeach()

  # Optimization level and debug info
  get_property(levels GLOBAL PROPERTY TILEIR_OPT_LEVELS)
  if(DEFINED arg_OPT_LEVEL)
    if(NOT arg_OPT_LEVEL IN_LIST levels)
      list(JOIN levels " " levels_text)
      _tileir_fail("${where}" "OPT_LEVEL must be one of ${levels_text}, got '${arg_OPT_LEVEL}'")
    endif()
    set(opt "${arg_OPT_LEVEL}")
  elseif(arg_DEVICE_DEBUG)
    set(opt 0)
  else()
    set(opt 3)
  endif()
  if(arg_DEVICE_DEBUG AND NOT opt STREQUAL "0")
    _tileir_fail("${where}" "DEVICE_DEBUG needs OPT_LEVEL 0 (optimized device debugging is not supported), got OPT_LEVEL ${opt}")
  endif()

  # Header
  set(header "${target}.h")
  if(DEFINED arg_HEADER)
    set(header "${arg_HEADER}")
  endif()
  get_filename_component(header_ext "${header}" LAST_EXT)
  if(IS_ABSOLUTE "${header}" OR header MATCHES "(^|/)\\.\\.(/|$)" OR NOT header_ext IN_LIST _TILEIR_HEADER_SUFFIXES)
    _tileir_fail("${where}" "HEADER '${header}' must be a relative file name ending in .h or .hpp, without '..'")
  endif()

  # Sources
  if(NOT arg_SOURCES)
    _tileir_fail("${where}" "SOURCES is empty; list the kernels' .tileirbc, .tileir or .mlir files")
  endif()
  get_property(suffixes GLOBAL PROPERTY TILEIR_SOURCE_SUFFIXES)
  set(sources "")
  foreach(source IN LISTS arg_SOURCES)
    get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    set(known FALSE)
    foreach(suffix IN LISTS suffixes)
      string(LENGTH "${suffix}" n)
      string(LENGTH "${path}" m)
      if(m GREATER n)
        math(EXPR start "${m} - ${n}")
        string(SUBSTRING "${path}" ${start} ${n} tail)
        if(tail STREQUAL suffix)
          set(known TRUE)
        endif()
      endif()
    endforeach()
    if(NOT known)
      list(JOIN suffixes " " suffix_text)
      _tileir_fail("${where}" "source '${source}' is not TileIR: expected one of ${suffix_text}")
    endif()
    get_source_file_property(generated "${path}" GENERATED)
    if(NOT EXISTS "${path}" AND NOT generated)
      _tileir_fail("${where}" "source '${source}' does not exist (looked for ${path})")
    endif()
    list(APPEND sources "${path}")
  endforeach()

  # The library: the generated objects, archived with the project's C or C++ tools.
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("C" IN_LIST languages)
    set(language C)
  elseif("CXX" IN_LIST languages)
    set(language CXX)
  else()
    _tileir_fail("${where}" "enable C or CXX in project() or enable_language(): the kernels link as C objects")
  endif()
  set(object_suffix "${CMAKE_${language}_OUTPUT_EXTENSION}")
  if(NOT object_suffix)
    set(object_suffix ".o")
  endif()
  set(kind STATIC)
  if(arg_OBJECT)
    set(kind OBJECT)
  endif()

  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/tileir/${target}")
  get_filename_component(header_dir "${out_dir}/include/${header}" DIRECTORY)
  file(MAKE_DIRECTORY "${out_dir}" "${header_dir}")

  # The one compiled source of the library includes the generated header: it
  # checks that the header compiles, and it makes every build of the target
  # (used or not) generate the header before anything compiles against it.
  set(check_source "${out_dir}/${target}_header_check.c")
  if(language STREQUAL "CXX")
    set(check_source "${out_dir}/${target}_header_check.cpp")
  endif()
  _tileir_write_if_changed("${check_source}"
    "/* Generated by add_tileir_kernel(): compiles the generated header once. */\n#include \"${header}\"\n")
  add_library(${target} ${kind} "${check_source}")
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE ${language})
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${out_dir}/include>")
  if(CMAKE_DL_LIBS)
    target_link_libraries(${target} INTERFACE ${CMAKE_DL_LIBS})
  endif()

  # What the planner gets (the request format of build_rules/README.md).
  _tileir_json_string(j_name "${target}")
  _tileir_json_list(j_sources ${sources})
  _tileir_json_string(j_out "${out_dir}")
  _tileir_json_string(j_header "${header}")
  _tileir_json_list(j_gpus ${gpus})
  _tileir_bool(j_lineinfo "${arg_LINEINFO}")
  _tileir_bool(j_debug "${arg_DEVICE_DEBUG}")
  _tileir_json_string(j_suffix "${object_suffix}")
  set(request "{\"name\": ${j_name}, \"sources\": ${j_sources}, \"out_dir\": ${j_out}, \"header\": ${j_header}, \"gpu_names\": ${j_gpus}, \"opt_level\": ${opt}, \"lineinfo\": ${j_lineinfo}, \"device_debug\": ${j_debug}, \"object_suffix\": ${j_suffix}}")
  set_property(TARGET ${target} PROPERTY TILEIR_REQUEST "${request}")

  # The options stamp: rewritten only when this target's options or the
  # compiler commands change, so Makefiles (which do not track command
  # lines) rebuild this target, and only it, like Ninja does.
  get_property(tileiras_cmd GLOBAL PROPERTY TILEIR_TILEIRAS_COMMAND)
  get_property(tileir_cmd GLOBAL PROPERTY TILEIR_TILEIR_COMMAND)
  _tileir_write_if_changed("${out_dir}/options.stamp"
    "gpu_names=${gpus}\nopt_level=${opt}\nlineinfo=${j_lineinfo}\ndevice_debug=${j_debug}\ntileiras=${tileiras_cmd}\ntileir=${tileir_cmd}\n")
  set_property(TARGET ${target} PROPERTY TILEIR_OPTIONS_STAMP "${out_dir}/options.stamp")

  set_property(DIRECTORY APPEND PROPERTY TILEIR_PENDING_TARGETS ${target})
  get_property(scheduled DIRECTORY PROPERTY TILEIR_FLUSH_SCHEDULED)
  if(NOT scheduled)
    set_property(DIRECTORY PROPERTY TILEIR_FLUSH_SCHEDULED TRUE)
    cmake_language(DEFER CALL _tileir_flush_directory)
  endif()
endfunction()

# Plans every pending target of this directory in one build_rules run and
# turns each action into a custom command.
function(_tileir_flush_directory)
  get_property(targets DIRECTORY PROPERTY TILEIR_PENDING_TARGETS)
  set_property(DIRECTORY PROPERTY TILEIR_PENDING_TARGETS "")
  set_property(DIRECTORY PROPERTY TILEIR_FLUSH_SCHEDULED FALSE)
  if(NOT targets)
    return()
  endif()
  set(entries "")
  foreach(target IN LISTS targets)
    get_property(entry TARGET ${target} PROPERTY TILEIR_REQUEST)
    list(APPEND entries "${entry}")
  endforeach()
  list(JOIN entries ",\n  " joined)
  set(state_dir "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/TileIR")
  file(MAKE_DIRECTORY "${state_dir}")
  file(WRITE "${state_dir}/request.json"
    "{\"policy\": {\"depfiles\": true, \"use_cache\": true},\n \"targets\": [\n  ${joined}]}\n")

  get_property(python GLOBAL PROPERTY TILEIR_PYTHON)
  _tileir_run_build_rules("${python}" rc err plan --format=cmake --request "${state_dir}/request.json"
                          -o "${state_dir}/plan.cmake")
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "add_tileir_kernel: planning the kernels of ${CMAKE_CURRENT_SOURCE_DIR} failed:\n${err}")
  endif()
  include("${state_dir}/plan.cmake")

  get_property(tileiras_cmd GLOBAL PROPERTY TILEIR_TILEIRAS_COMMAND)
  get_property(tileir_cmd GLOBAL PROPERTY TILEIR_TILEIR_COMMAND)
  get_property(compiler_depends GLOBAL PROPERTY TILEIR_COMPILER_DEPENDS)
  get_property(client_prefix GLOBAL PROPERTY TILEIR_CLIENT_PREFIX)
  set(TileIR_REMOTE_CACHE "" CACHE STRING "Shared compile cache: grpc://HOST:PORT[/INSTANCE] of a REAPI server")
  option(TileIR_REMOTE_CACHE_READ_ONLY "Only read the shared compile cache" OFF)
  if(TileIR_REMOTE_CACHE)  # the compile cache's remote tier (tileiras/cache/remote.py), shared with Bazel
    set(remote_env "TILEIRAS_REMOTE_CACHE=${TileIR_REMOTE_CACHE}")
    if(TileIR_REMOTE_CACHE_READ_ONLY)
      list(APPEND remote_env "TILEIRAS_REMOTE_CACHE_READ_ONLY=1")
    endif()
    set(client_prefix "${CMAKE_COMMAND}" -E env ${remote_env} ${client_prefix})
  endif()
  math(EXPR last_plan "${_tileir_plan_count} - 1")
  foreach(i RANGE ${last_plan})
    set(p "_tileir_plan_${i}")
    set(target "${${p}_name}")
    get_property(options_stamp TARGET ${target} PROPERTY TILEIR_OPTIONS_STAMP)
    math(EXPR last_action "${${p}_action_count} - 1")
    set(stamps "")
    foreach(j RANGE ${last_action})
      set(a "${p}_action_${j}")
      if(${a}_tool STREQUAL "tileiras")
        set(command ${client_prefix} ${tileiras_cmd})
      else()
        set(command ${client_prefix} ${tileir_cmd})
      endif()
      set(depfile_args "")
      if(NOT ${a}_depfile STREQUAL "")
        set(depfile_args DEPFILE "${${a}_depfile}")
      endif()
      if(${a}_step STREQUAL "header")
        # The header is rewritten only when its text changes, so that
        # consumers do not recompile. Ninja sees that through restat; Make
        # would rerun the command on every build, so a stamp records the run.
        set(stamp "${${a}_outputs}.stamp")
        add_custom_command(
          OUTPUT "${stamp}"
          BYPRODUCTS ${${a}_outputs}
          COMMAND ${command} ${${a}_args}
          COMMAND "${CMAKE_COMMAND}" -E touch "${stamp}"
          DEPENDS ${${a}_inputs} ${compiler_depends} "${options_stamp}"
          COMMENT "${${a}_comment}"
          VERBATIM)
        list(APPEND stamps "${stamp}")
      else()
        add_custom_command(
          OUTPUT ${${a}_outputs}
          COMMAND ${command} ${${a}_args}
          DEPENDS ${${a}_inputs} ${compiler_depends} "${options_stamp}"
          ${depfile_args}
          COMMENT "${${a}_comment}"
          VERBATIM)
      endif()
    endforeach()
    get_target_property(kind ${target} TYPE)
    if(kind STREQUAL "OBJECT_LIBRARY")
      # CMake object libraries carry only objects they compile themselves, so
      # the generated ones go to consumers' link lines through the link
      # interface (linked whole, as object-library objects are); listing them
      # as header-only sources keeps their commands in this target.
      set_source_files_properties(${${p}_objects} PROPERTIES HEADER_FILE_ONLY TRUE GENERATED TRUE)
      target_link_libraries(${target} INTERFACE ${${p}_objects})
    else()
      set_source_files_properties(${${p}_objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    endif()
    target_sources(${target} PRIVATE ${${p}_objects} ${stamps})
    set_target_properties(${target} PROPERTIES
      TILEIR_HEADER "${${p}_header}"
      TILEIR_OBJECTS "${${p}_objects}"
      TILEIR_INCLUDE_DIR "${${p}_include_dir}")
  endforeach()
endfunction()
