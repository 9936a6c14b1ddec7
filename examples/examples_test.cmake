# CTest check that the examples build and run: kiln_make_example writes the program and input,
# kiln_run_example runs the program through the Module API and names a class.
#   cmake -DMAKE_EXAMPLE=... -DRUN_EXAMPLE=... -DWORK_DIR=... -P examples_test.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND "${MAKE_EXAMPLE}" "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS "${WORK_DIR}/mlp.kiln" OR NOT EXISTS "${WORK_DIR}/x.npy")
  message(FATAL_ERROR "kiln_make_example failed (exit ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${RUN_EXAMPLE}" "${WORK_DIR}/mlp.kiln" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "predicted class: [0-3]")
  message(FATAL_ERROR "kiln_run_example failed (exit ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${MAKE_EXAMPLE}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "usage: kiln_make_example OUTDIR")
  message(FATAL_ERROR "kiln_make_example without arguments: exit ${rc}, stderr:\n${err}")
endif()
message(STATUS "examples ok:\n${out}")
