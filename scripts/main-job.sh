#!/usr/bin/env bash
# THE main job: bash scripts/main-job.sh
#
# Builds the release preset, writes the example program (an MLP, build/main-job/mlp.kiln, and
# its input x.npy) and runs it twice with the `kiln` tool, printing outputs and load/run times.
# The example runs on the reference kernels, which specialize nothing, so both loads cost
# alike; once KilnBackend delegates exist, the first load fills build/main-job/cache and the
# second finds it warm.
# Then `kiln inspect` shows what the program contains.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT="$ROOT/build/main-job"
KILN="$ROOT/build/release/tools/kiln/kiln"
MAKE_EXAMPLE="$ROOT/build/release/examples/kiln_make_example"

step() { echo; echo "=== $* ==="; }

step "install dependencies"
bash scripts/install-deps.sh

step "build (release preset)"
cmake --preset release
cmake --build --preset release --target kiln_tool kiln_make_example

step "write the example program"
rm -rf "$OUT"
mkdir -p "$OUT"
"$MAKE_EXAMPLE" "$OUT"
ls -l "$OUT"

# A cache of our own, empty at the start (used once programs carry KilnBackend delegates).
export KILN_CACHE_DIR="$OUT/cache"

run_timed() {
  local label=$1
  shift
  step "kiln run: $label load"
  local start end
  start=$(date +%s%N)
  "$KILN" run "$OUT/mlp.kiln" --input "x=$OUT/x.npy" "$@"
  end=$(date +%s%N)
  echo "[$label load] wall time: $(( (end - start) / 1000000 )) ms"
}

run_timed first
run_timed second

step "kiln inspect"
"$KILN" inspect "$OUT/mlp.kiln"

echo
echo "main job: done (outputs in build/main-job/)"
