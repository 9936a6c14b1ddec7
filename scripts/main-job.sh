#!/usr/bin/env bash
# THE main job: bash scripts/main-job.sh
#
# Builds the release preset, exports the bundled digit classifier (examples/digits/digits.onnx,
# a small CNN trained on scikit-learn's 8x8 digits) to build/main-job/digits.kiln with
# `kiln export`, shows what the program holds (`kiln inspect`), and classifies the ten bundled
# test images twice, in two processes, printing each predicted digit, its label and the load
# and run times. The program's forward method is one KilnBackend delegate (the default export
# backend) over two static functions, for a batch of 10 images (listed first: the default
# shape) and of 1 (--enumerate): the first process specializes both for this CPU and stores the
# compiled artifact with the packed weights in build/main-job/cache (a cold load, "cache
# miss"); the second maps it from there without repacking any weight and builds the default
# shape's function before its first run (a warm load, "cache hit"; the batch-1 function would
# be built on its first call). `kiln cache list` shows the entry.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT="$ROOT/build/main-job"
KILN="$ROOT/build/release/tools/kiln/kiln"
CLASSIFY="$ROOT/build/release/examples/kiln_classify_digits"
DIGITS="$ROOT/examples/digits"

step() { echo; echo "=== $* ==="; }

step "install dependencies"
bash scripts/install-deps.sh

step "build (release preset)"
cmake --preset release
cmake --build --preset release --target kiln_tool kiln_classify_digits

step "kiln export examples/digits/digits.onnx"
rm -rf "$OUT"
mkdir -p "$OUT"
"$KILN" export "$DIGITS/digits.onnx" -o "$OUT/digits.kiln" --enumerate forward:x:0=10,1
ls -l "$OUT"

step "kiln inspect"
"$KILN" inspect "$OUT/digits.kiln"

# A cache of our own, empty at the start, so the first load is cold.
export KILN_CACHE_DIR="$OUT/cache"

classify() {
  local label=$1
  step "classify the bundled digits: $label load"
  local start end
  start=$(date +%s%N)
  "$CLASSIFY" "$OUT/digits.kiln" "$DIGITS/test_images.npy" "$DIGITS/test_labels.npy"
  end=$(date +%s%N)
  echo "[$label load] process wall time: $(( (end - start) / 1000000 )) ms"
}

classify "first (cold)"
classify "second (warm)"

step "kiln cache list"
"$KILN" cache list

echo
echo "main job: done (program in build/main-job/)"
