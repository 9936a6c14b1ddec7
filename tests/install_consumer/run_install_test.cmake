# Install test, run by CTest as `cmake -P`:
#   1. cmake --install the build tree into WORK_DIR/prefix;
#   2. check the installed layout (library, package files, headers that resolve, no tests);
#   3. configure and build tests/install_consumer against it (find_package(kiln));
#   4. write a program with kiln_make_example and run the consumer (and the installed `kiln`
#      tool, without LD_LIBRARY_PATH: its RPATH must find libkiln.so).
#
# Variables (-D): BUILD_DIR, CONSUMER_DIR, WORK_DIR, MAKE_EXAMPLE, CXX_COMPILER, BUILD_TYPE,
# GENERATOR, SANITIZE_FLAGS (may be empty), LIBDIR, TOOL_NAME (may be empty: no tool built).
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR CONSUMER_DIR WORK_DIR MAKE_EXAMPLE CXX_COMPILER GENERATOR LIBDIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install test: -D${var}=... is required")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (exit ${rc})\n"
                        "command: ${ARGN}\n--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  message(STATUS "install test: ${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# 1. install
run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# 2. layout
set(expected
  ${prefix}/${LIBDIR}/libkiln.so
  ${prefix}/${LIBDIR}/cmake/kiln/kilnConfig.cmake
  ${prefix}/${LIBDIR}/cmake/kiln/kilnConfigVersion.cmake
  ${prefix}/${LIBDIR}/cmake/kiln/kilnTargets.cmake
  ${prefix}/include/kiln/runtime/core/error.h
  ${prefix}/include/kiln/runtime/executor/program.h
  ${prefix}/include/kiln/extension/module/module.h)
if(TOOL_NAME)
  list(APPEND expected ${prefix}/bin/${TOOL_NAME})
endif()
foreach(file ${expected})
  if(NOT EXISTS ${file})
    message(FATAL_ERROR "install test: ${file} was not installed")
  endif()
endforeach()
if(EXISTS ${prefix}/include/kiln/testing)
  message(FATAL_ERROR "install test: the test helpers (include/kiln/testing) were installed")
endif()
file(GLOB_RECURSE installed_headers RELATIVE ${prefix}/include ${prefix}/include/kiln/*)
foreach(header ${installed_headers})
  if(header MATCHES "/test/" OR NOT header MATCHES "\\.h$")
    message(FATAL_ERROR "install test: include/${header} should not be installed")
  endif()
  # Every kiln header an installed header includes must be installed too.
  file(STRINGS ${prefix}/include/${header} includes REGEX "^[ \t]*#[ \t]*include[ \t]*<kiln/")
  foreach(line ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*<([^>]+)>.*" "\\1" included "${line}")
    if(NOT EXISTS ${prefix}/include/${included})
      message(FATAL_ERROR
        "install test: include/${header} includes <${included}>, which is not installed")
    endif()
  endforeach()
endforeach()
list(LENGTH installed_headers num_headers)
message(STATUS "install test: ${num_headers} installed headers resolve")

# 3. consumer
set(consumer_args -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer -G ${GENERATOR}
                  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(BUILD_TYPE)
  list(APPEND consumer_args -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()
if(SANITIZE_FLAGS)
  # An instrumented libkiln.so needs an instrumented executable (the runtime must come first).
  list(APPEND consumer_args "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}"
                            "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
endif()
run_step("configure consumer" ${CMAKE_COMMAND} ${consumer_args})
run_step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)

# 4. run
run_step("kiln_make_example" ${MAKE_EXAMPLE} ${WORK_DIR}/example)
if(NOT EXISTS ${WORK_DIR}/example/mlp.kiln)
  message(FATAL_ERROR "install test: kiln_make_example wrote no ${WORK_DIR}/example/mlp.kiln")
endif()
set(ENV{LD_LIBRARY_PATH} "")
run_step("run consumer" ${WORK_DIR}/consumer/kiln_consumer ${WORK_DIR}/example/mlp.kiln)
message("${step_output}")
if(NOT step_output MATCHES "kiln_consumer: ok")
  message(FATAL_ERROR "install test: the consumer did not report success")
endif()
if(TOOL_NAME)
  run_step("installed ${TOOL_NAME} inspect" ${prefix}/bin/${TOOL_NAME} inspect
           ${WORK_DIR}/example/mlp.kiln)
endif()
message(STATUS "install test: passed")
