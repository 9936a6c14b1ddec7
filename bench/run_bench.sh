#!/usr/bin/env bash
# Speed of kiln against ONNX Runtime on the real-model set:
#
#   bench/run_bench.sh [--models DIR] [--threads 1,2] [--runs N] [other flags of run_bench.mjs]
#
# Makes the models into DIR (default build/bench-models) when any is missing, then runs
# bench/run_bench.mjs: export each model with `kiln export --backend portable`, interleave
# `kiln bench` and bench/bench_ort.mjs over 3 rounds, print the table of medians and write it to
# bench/RESULTS.md. About 6 minutes on a 2-core machine with the defaults. Needs
# scripts/install-bench-deps.sh and the kiln tool (release preset, kiln_tool).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
MODELS="$ROOT/build/bench-models"
PYTHON=${PYTHON:-/usr/bin/python3}

# The command as typed, for RESULTS.md.
export RUN_BENCH_COMMAND="bench/run_bench.sh${*:+ $*}"
pass=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models)
      [[ $# -ge 2 ]] || { echo "run_bench.sh: error: --models needs a directory" >&2; exit 2; }
      MODELS=$(realpath -m "$2")
      shift 2
      ;;
    *)
      pass+=("$1")
      shift
      ;;
  esac
done

need_models() {
  [[ -f "$MODELS/models.json" ]] || return 0
  local name
  for name in resnet18 mobilenet_v2 squeezenet1_1 ocr_det ocr_rec vad gpt_prefill gpt_decode \
      digits; do
    [[ -f "$MODELS/$name.onnx" ]] || return 0
  done
  return 1
}

if need_models; then
  if ! "$PYTHON" -c 'import torch, torchvision, onnx' 2>/dev/null; then
    echo "run_bench.sh: error: $PYTHON cannot import torch, torchvision and onnx;" \
         "run scripts/install-bench-deps.sh" >&2
    exit 1
  fi
  echo "run_bench.sh: making the models in $MODELS" >&2
  "$PYTHON" bench/models/make_models.py "$MODELS"
fi

exec node bench/run_bench.mjs --models "$MODELS" "${pass[@]}"
