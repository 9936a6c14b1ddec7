#!/usr/bin/env bash
# THE test command: bash scripts/test.sh
#
#   1. install dependencies (scripts/install-deps.sh; no-op when present)
#   2. release preset: configure, build, ctest
#   3. asan preset (address + undefined): configure, build, ctest (program-loading robustness
#      and every other test under the sanitizers)
#   4. fuzz preset (clang, libFuzzer): build, write the seed corpus, run the program fuzzer
#      and the ONNX importer fuzzer (seeded with the conformance models when present)
#
# Every phase runs even when an earlier independent one failed; the summary at the end lists
# each phase with its result and time, and the exit status is non-zero on any failure.
# Logs: build/logs/<phase>.log. Environment: KILN_FUZZ_SECONDS (default 60, the program fuzzer),
# KILN_IMPORT_FUZZ_RUNS (default 8000, the importer fuzzer), KILN_SKIP_ASAN=1,
# KILN_SKIP_FUZZ=1 (local shortcuts; CI runs everything).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
LOGS="$ROOT/build/logs"
mkdir -p "$LOGS"
FUZZ_SECONDS=${KILN_FUZZ_SECONDS:-60}

phases=()
results=()
times=()
failed=0
start_all=$SECONDS

# run_phase NAME COMMAND...: runs COMMAND with output to the terminal and build/logs/NAME.log.
run_phase() {
  local name=$1
  shift
  local start=$SECONDS rc=0
  echo
  echo "=== [$name] $* ==="
  set +e
  "$@" 2>&1 | tee "$LOGS/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  local elapsed=$((SECONDS - start))
  phases+=("$name")
  times+=("$elapsed")
  if [[ $rc -eq 0 ]]; then
    results+=("ok")
    echo "=== [$name] ok (${elapsed}s) ==="
  else
    results+=("FAILED (exit $rc)")
    failed=1
    echo "=== [$name] FAILED with exit $rc after ${elapsed}s (log: build/logs/$name.log) ==="
  fi
  return $rc
}

skip_phase() {
  phases+=("$1")
  results+=("skipped: $2")
  times+=(0)
  echo "=== [$1] skipped: $2 ==="
}

summary() {
  echo
  echo "================ kiln test summary ================"
  local i
  for i in "${!phases[@]}"; do
    printf '  %-16s %6ss  %s\n' "${phases[$i]}" "${times[$i]}" "${results[$i]}"
  done
  printf '  %-16s %6ss\n' "total" "$((SECONDS - start_all))"
  if [[ $failed -eq 0 ]]; then
    echo "  RESULT: PASS"
  else
    echo "  RESULT: FAIL"
  fi
  echo "==================================================="
}

# preset_build_and_test PRESET: configure + build, then ctest; a failed build skips ctest.
preset_build_and_test() {
  local preset=$1
  if run_phase "$preset-build" bash -c \
      "cmake --preset $preset && cmake --build --preset $preset"; then
    # KilnBackend stores specializations; the tests keep theirs in the build tree, not $HOME.
    rm -rf "$ROOT/build/$preset/test-cache"
    run_phase "$preset-test" env KILN_CACHE_DIR="$ROOT/build/$preset/test-cache" \
      ctest --preset "$preset" || true
  else
    skip_phase "$preset-test" "build failed"
  fi
}

fuzz_run() {
  local dir="$ROOT/build/fuzz"
  rm -rf "$dir/corpus" "$dir/artifacts"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  "$dir/fuzz/make_program_seeds" "$dir/corpus" || return
  # Crashes, leaks, timeouts and OOMs make libFuzzer exit non-zero and leave the input in
  # build/fuzz/artifacts/ (reproduce: build/fuzz/fuzz/program_load_fuzzer ARTIFACT).
  "$dir/fuzz/program_load_fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
    "$dir/corpus" || return
  # The importer fuzzer, seeded with every 12th ONNX backend test model when the conformance
  # data is present beside the checkout. ONNX's own steps run in a forked child per input
  # (slow under ASan), so this run is a fixed number of inputs from a fixed seed: the same
  # inputs on every run, so CI stays deterministic. Explore longer by hand (fuzz/README.md).
  rm -rf "$dir/onnx-corpus"
  mkdir -p "$dir/onnx-corpus"
  local cases="$ROOT/../shared/conformance/onnx/node" i=0 model
  if [[ -d "$cases" ]]; then
    for model in "$cases"/*/model.onnx; do
      i=$((i + 1))
      if (( i % 12 == 0 )); then
        cp "$model" "$dir/onnx-corpus/$(basename "$(dirname "$model")").onnx"
      fi
    done
  fi
  "$dir/fuzz/onnx_import_fuzzer" -seed=1 -runs="${KILN_IMPORT_FUZZ_RUNS:-8000}" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
    "$dir/onnx-corpus"
}

if ! run_phase deps bash scripts/install-deps.sh; then
  summary
  exit 1
fi

preset_build_and_test release

if [[ "${KILN_SKIP_ASAN:-0}" == 1 && "${CI:-}" != true ]]; then
  skip_phase asan-build "KILN_SKIP_ASAN=1"
else
  preset_build_and_test asan
fi

if [[ "${KILN_SKIP_FUZZ:-0}" == 1 && "${CI:-}" != true ]]; then
  skip_phase fuzz-build "KILN_SKIP_FUZZ=1"
elif run_phase fuzz-build bash -c \
    "cmake --preset fuzz && cmake --build --preset fuzz --target make_program_seeds program_load_fuzzer onnx_import_fuzzer"; then
  run_phase fuzz-run fuzz_run || true
else
  skip_phase fuzz-run "build failed"
fi

summary
exit $failed
