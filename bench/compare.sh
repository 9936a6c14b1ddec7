#!/usr/bin/env bash
# Compares kiln with ONNX Runtime on the real-model set:
#
#   bench/compare.sh [--models DIR] [--only NAME,...] [other flags of bench/compare_ort.mjs]
#
# Makes the models into DIR (default build/bench-models) when any is missing or out of date,
# then runs bench/compare_ort.mjs, which prints one line per model and exits non-zero when any
# model fails. Needs scripts/install-bench-deps.sh and the kiln tool (release preset, kiln_tool).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_parse_args compare.sh "$@"
bench_make_models compare.sh

exec node bench/compare_ort.mjs --models "$MODELS" "${PASS[@]}"
