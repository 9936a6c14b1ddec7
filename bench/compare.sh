#!/usr/bin/env bash
# Compares kiln with ONNX Runtime on the real-model set:
#
#   bench/compare.sh [--models DIR] [other flags of bench/compare_ort.mjs]
#
# Makes the models into DIR (default build/bench-models) when any is missing, then runs
# bench/compare_ort.mjs, which prints one line per model and exits non-zero when any model
# fails. Needs scripts/install-bench-deps.sh and the kiln tool (release preset, kiln_tool).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
MODELS="$ROOT/build/bench-models"
PYTHON=${PYTHON:-/usr/bin/python3}

pass=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models)
      [[ $# -ge 2 ]] || { echo "compare.sh: error: --models needs a directory" >&2; exit 2; }
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
    echo "compare.sh: error: $PYTHON cannot import torch, torchvision and onnx;" \
         "run scripts/install-bench-deps.sh" >&2
    exit 1
  fi
  echo "compare.sh: making the models in $MODELS"
  "$PYTHON" bench/models/make_models.py "$MODELS"
fi

exec node bench/compare_ort.mjs --models "$MODELS" "${pass[@]}"
