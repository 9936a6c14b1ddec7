#!/usr/bin/env bash
# Speed of kiln against ONNX Runtime on the real-model set:
#
#   bench/run_bench.sh [--models DIR] [--backend kiln|portable] [--threads 1,2] [--runs N]
#                      [--only NAME,...] [other flags of run_bench.mjs]
#
# Makes the models into DIR (default build/bench-models) when any is missing or out of date,
# then runs bench/run_bench.mjs: export each model with `kiln export --backend kiln` (or
# portable), interleave `kiln bench` and bench/bench_ort.mjs over 3 rounds, print the table of
# medians and ratios and write it to bench/RESULTS.md. Needs scripts/install-bench-deps.sh and
# the kiln tool (release preset, kiln_tool).
set -euo pipefail

command="bench/run_bench.sh${*:+ $*}"
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_parse_args run_bench.sh "$@"
# The command as typed, for RESULTS.md; paths inside the checkout relative to its root.
export RUN_BENCH_COMMAND="${command//$ROOT\//}"
bench_make_models run_bench.sh

exec node bench/run_bench.mjs --models "$MODELS" "${PASS[@]}"
