# End-to-end test of the `kiln` command, run by CTest:
#   cmake -DKILN=<kiln> -DMAKE_EXAMPLE=<kiln_make_example> -DWORK_DIR=<dir> -P cli_test.cmake
# Writes the bundled example, runs and inspects it, and checks that bad inputs fail with a
# message on stderr and a non-zero exit code.

foreach(var KILN MAKE_EXAMPLE WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "cli_test.cmake: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(failures 0)

# run_kiln(NAME EXPECT ok|fail [STDOUT regex...] [STDERR regex...] ARGS args...)
function(run_kiln name)
  cmake_parse_arguments(ARG "" "EXPECT;PROGRAM" "STDOUT;STDERR;ARGS" ${ARGN})
  if(NOT ARG_PROGRAM)
    set(ARG_PROGRAM "${KILN}")
  endif()
  execute_process(COMMAND "${ARG_PROGRAM}" ${ARG_ARGS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(ok TRUE)
  if(ARG_EXPECT STREQUAL "ok" AND NOT rc EQUAL 0)
    set(ok FALSE)
    set(why "exit code ${rc} (expected 0)")
  elseif(ARG_EXPECT STREQUAL "fail" AND rc EQUAL 0)
    set(ok FALSE)
    set(why "exit code 0 (expected non-zero)")
  endif()
  foreach(pattern IN LISTS ARG_STDOUT)
    if(ok AND NOT out MATCHES "${pattern}")
      set(ok FALSE)
      set(why "stdout does not match '${pattern}'")
    endif()
  endforeach()
  foreach(pattern IN LISTS ARG_STDERR)
    if(ok AND NOT err MATCHES "${pattern}")
      set(ok FALSE)
      set(why "stderr does not match '${pattern}'")
    endif()
  endforeach()
  if(ok)
    message(STATUS "ok    ${name}")
  else()
    message(STATUS "FAIL  ${name}: ${why}\n  args: ${ARG_ARGS}\n  stdout:\n${out}\n  stderr:\n${err}")
    math(EXPR count "${failures} + 1")
    set(failures ${count} PARENT_SCOPE)
  endif()
endfunction()

set(program "${WORK_DIR}/mlp.kiln")
set(input "${WORK_DIR}/x.npy")

run_kiln(make_example PROGRAM "${MAKE_EXAMPLE}" EXPECT ok ARGS "${WORK_DIR}"
         STDOUT "wrote .*mlp.kiln" "wrote .*x.npy")

# The example's probabilities, computed independently (in double precision) from its weights.
run_kiln(run_with_input EXPECT ok
         ARGS run "${program}" --input "x=${input}" --output-dir "${WORK_DIR}/out"
         STDOUT "method  forward"
                "input   x: f32 \\[1, 16\\] from "
                "output  probs: f32 \\[1, 4\\] = \\[0\\.520[0-9]*, 0\\.0558[0-9]*, 0\\.2155[0-9]*, 0\\.2084[0-9]*\\]"
                "time    program load [0-9.]+ ms, method load [0-9.]+ ms, first run [0-9.]+ ms")
if(NOT EXISTS "${WORK_DIR}/out/probs.npy")
  message(STATUS "FAIL  run_with_input: ${WORK_DIR}/out/probs.npy was not written")
  math(EXPR failures "${failures} + 1")
endif()

# The written output is a valid .npy that `kiln run` reads back (as a wrong-shaped input).
run_kiln(output_npy_reads_back EXPECT fail
         ARGS run "${program}" --input "x=${WORK_DIR}/out/probs.npy"
         STDERR "input 0 'x' has shape \\[1, 4\\] \\(expected \\[1, 16\\]\\)")

run_kiln(run_random_file_mode EXPECT ok
         ARGS run "${program}" --load-mode file --seed 3
         STDOUT "\\(file\\)" "random \\(seed 3\\)" "output  probs: f32 \\[1, 4\\]")

run_kiln(inspect_text EXPECT ok ARGS inspect "${program}"
         STDOUT "method forward" "x  f32 \\[1, 16\\]  static" "probs  f32 \\[1, 4\\]  static"
                "kernel calls: MatMul x2, Add x2, Relu x1, Softmax x1" "planned memory: [0-9]+ bytes"
                "segments:" "constants of 'forward'")

run_kiln(inspect_json EXPECT ok ARGS inspect "${program}" --json
         STDOUT "\"methods\"" "\"kernel_calls\"" "\"Softmax\"" "\"segments\"" "\"named_data\"")

# Errors: a message on stderr and a non-zero exit.
file(WRITE "${WORK_DIR}/bad.npy" "this is not numpy")
run_kiln(bad_npy EXPECT fail ARGS run "${program}" --input "x=${WORK_DIR}/bad.npy"
         STDERR "read npy '.*bad.npy': file does not start with the NumPy magic")
run_kiln(missing_npy EXPECT fail ARGS run "${program}" --input "x=${WORK_DIR}/absent.npy"
         STDERR "absent.npy")
run_kiln(unknown_input EXPECT fail ARGS run "${program}" --input "y=${input}"
         STDERR "has no input 'y' \\(expected one of 'x'\\)")
run_kiln(missing_program EXPECT fail ARGS run "${WORK_DIR}/absent.kiln"
         STDERR "absent.kiln")
run_kiln(not_a_program EXPECT fail ARGS inspect "${input}" STDERR "x.npy")
run_kiln(bad_option EXPECT fail ARGS run "${program}" --option "num_threads=4"
         STDERR "expected BACKEND.KEY=VALUE")
run_kiln(unregistered_backend EXPECT fail ARGS run "${program}" --option "NoSuchBackend.x=1"
         STDERR "NoSuchBackend")
run_kiln(unknown_method EXPECT fail ARGS run "${program}" --method nope STDERR "nope")
run_kiln(unknown_subcommand EXPECT fail ARGS frobnicate STDERR "unknown subcommand 'frobnicate'")
run_kiln(export_missing_model EXPECT fail
         ARGS export "${WORK_DIR}/absent.onnx" -o "${WORK_DIR}/out.kiln" STDERR "absent.onnx")
run_kiln(export_bad_bound EXPECT fail
         ARGS export "${WORK_DIR}/absent.onnx" -o "${WORK_DIR}/out.kiln" --bound "x=3"
         STDERR "expected METHOD:INPUT:DIM=MAX")
run_kiln(export_not_onnx EXPECT fail
         ARGS export "${input}" -o "${WORK_DIR}/out.kiln" STDERR "not a valid ONNX protobuf")

# kiln devices and kiln cache (over an empty cache directory; ModelCache-filled directories and
# programs with model packages are covered by cache_tool_test.cpp).
run_kiln(devices_text EXPECT ok ARGS devices
         STDOUT "^cpu  " "cores     [0-9]+" "cpu features \\(cache key\\): "
                "engine \\(cache key\\): +kiln-engine [0-9]+ build [0-9a-f]+ / oneDNN [0-9.]+ \\([^)]*\\) [A-Z]")
run_kiln(devices_json EXPECT ok ARGS devices --json
         STDOUT "\"kind\": \"cpu\"" "\"cores\": [0-9]+" "\"cpu_features\": "
                "\"engine_version\": \"kiln-engine ")
# oneDNN's instruction-set limit is part of the engine version (and so of cache keys).
run_kiln(devices_isa_limit EXPECT ok PROGRAM "${CMAKE_COMMAND}"
         ARGS -E env ONEDNN_MAX_CPU_ISA=SSE41 "${KILN}" devices
         STDOUT "engine \\(cache key\\): [^\n]* SSE41\n")
set(cache_dir "${WORK_DIR}/cache")
run_kiln(cache_list_absent_dir EXPECT ok ARGS cache list --cache-dir "${cache_dir}"
         STDOUT "cache .*cache: 0 entries")
run_kiln(cache_list_json EXPECT ok ARGS cache list --cache-dir "${cache_dir}" --json
         STDOUT "^\\[\\]")
run_kiln(cache_stats_json EXPECT ok ARGS cache stats --cache-dir "${cache_dir}" --json
         STDOUT "\"entries\": 0" "\"budget_bytes\": 2147483648" "\"models\": \\[\\]")
run_kiln(cache_evict_portable_program EXPECT ok
         ARGS cache evict "${program}" --cache-dir "${cache_dir}"
         STDOUT "holds no KilnBackend model package" "removed 0 entries")
run_kiln(cache_purge EXPECT ok ARGS cache purge --cache-dir "${cache_dir}"
         STDOUT "removed 0 entries")
run_kiln(cache_evict_missing_program EXPECT fail
         ARGS cache evict "${WORK_DIR}/absent.kiln" --cache-dir "${cache_dir}"
         STDERR "kiln cache: error: .*absent.kiln")
run_kiln(cache_evict_not_a_program EXPECT fail
         ARGS cache evict "${input}" --cache-dir "${cache_dir}"
         STDERR "x.npy")
run_kiln(cache_evict_needs_program EXPECT fail ARGS cache evict --cache-dir "${cache_dir}"
         STDERR "'evict' needs a program")
run_kiln(cache_unknown_action EXPECT fail ARGS cache frobnicate STDERR "frobnicate not in")
run_kiln(cache_no_directory EXPECT fail PROGRAM "${CMAKE_COMMAND}"
         ARGS -E env KILN_CACHE_DIR= "${KILN}" cache list
         STDERR "no cache directory is configured: KILN_CACHE_DIR is set and empty")

# kiln bench: text and JSON reports, and its errors.
run_kiln(bench_text EXPECT ok ARGS bench "${program}" --warmup 1 --runs 3
         STDOUT "method    forward" "input     x: f32 \\[1, 16\\] random \\(seed 0\\)"
                "load      [0-9.]+ ms \\(program [0-9.]+ ms, method [0-9.]+ ms, cache off\\)"
                "first run [0-9.]+ ms"
                "latency   median [0-9.]+ ms, p90 [0-9.]+ ms, min [0-9.]+ ms, mean [0-9.]+ ms \\(3 runs after 1 warm-up\\)"
                "memory    peak RSS [0-9.]+ MiB, [0-9.]+ MiB above the RSS before the program load")
run_kiln(bench_json EXPECT ok ARGS bench "${program}" --input "x=${input}" --threads 2 --json
         STDOUT "^{" "\"method\": \"forward\"" "\"threads\": 2" "\"load_ms\": [0-9.e-]+"
                "\"cache\": \"off\"" "\"first_run_ms\": [0-9.e-]+" "\"runs\": 10"
                "\"latency_ms\": {" "\"median\": " "\"p90\": " "\"min\": " "\"mean\": "
                "\"source\": \"from .*x.npy\""
                "\"memory\": {" "\"rss_before_mib\": [0-9.e-]+" "\"peak_rss_mib\": [0-9.e-]+"
                "\"peak_growth_mib\": [0-9.e-]+")
run_kiln(bench_pause EXPECT ok ARGS bench "${program}" --warmup 0 --runs 2 --pause-ms 5 --json
         STDOUT "\"pause_ms\": 5" "\"runs\": 2")
run_kiln(bench_bad_pause EXPECT fail ARGS bench "${program}" --pause-ms -1 STDERR "--pause-ms")
run_kiln(bench_bad_runs EXPECT fail ARGS bench "${program}" --runs 0 STDERR "--runs")
run_kiln(bench_bad_threads EXPECT fail ARGS bench "${program}" --threads 0 STDERR "--threads")
run_kiln(bench_unknown_method EXPECT fail ARGS bench "${program}" --method nope
         STDERR "kiln bench: error: .*'nope'")
run_kiln(bench_bad_npy EXPECT fail ARGS bench "${program}" --input "x=${WORK_DIR}/bad.npy"
         STDERR "kiln bench: error: read npy '.*bad.npy'")
run_kiln(bench_unknown_input EXPECT fail ARGS bench "${program}" --input "y=${input}"
         STDERR "has no input 'y'")
run_kiln(bench_threads_twice EXPECT fail
         ARGS bench "${program}" --threads 2 --option "KilnBackend.num_threads=4"
         STDERR "both set the thread count")
run_kiln(help_lists_subcommands EXPECT ok ARGS --help
         STDOUT "run" "inspect" "export" "bench" "cache" "devices" "conformance")

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} kiln command check(s) failed")
endif()
