#!/usr/bin/env bash
# Warm load of an enumerated model against the number of its functions (issue target: 64
# functions load warm in at most 4 x the time of 1):
#
#   bench/enumerated_load.sh [--models DIR] [--runs N]
#
# Exports GPT prefill (build/bench-models/gpt_prefill.onnx, made by bench/compare.sh or
# bench/run_bench.sh) with `--enumerate forward:input_ids:1=...` listing 1, 16 and 64 sequence
# lengths (8, 16, 24, ...), fills a fresh cache with one cold load each, then runs N fresh
# `kiln bench` processes per program (cache hits) and prints the median load time and its ratio
# to the 1-function program's. Needs the kiln tool (release preset, kiln_tool).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODELS=build/bench-models
RUNS=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) MODELS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    *) echo "enumerated_load.sh: error: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
KILN=${KILN:-build/release/tools/kiln/kiln}
MODEL="$MODELS/gpt_prefill.onnx"
[[ -x "$KILN" ]] || { echo "enumerated_load.sh: error: no kiln tool at $KILN" >&2; exit 2; }
[[ -f "$MODEL" ]] || { echo "enumerated_load.sh: error: no $MODEL (run bench/compare.sh)" >&2; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export KILN_CACHE_DIR="$WORK/cache"
median_of() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -A median
echo "| functions | warm load, median of $RUNS (ms) | ratio to 1 function |"
echo "|---:|---:|---:|"
for count in 1 16 64; do
  values=$(seq -s, 8 8 $((8 * count)))
  program="$WORK/gpt_prefill_$count.kiln"
  "$KILN" export "$MODEL" -o "$program" --enumerate "forward:input_ids:1=$values" >/dev/null
  "$KILN" bench "$program" --runs 1 --warmup 0 --json >/dev/null  # cold: specialize, store
  loads=()
  for _ in $(seq "$RUNS"); do
    read -r load cache < <("$KILN" bench "$program" --runs 1 --warmup 0 --json |
      node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
        const r = JSON.parse(s); console.log(r.load_ms, r.cache); });')
    [[ "$cache" == hit ]] || {
      echo "enumerated_load.sh: error: a warm load reported cache '$cache', not hit" >&2; exit 1; }
    loads+=("$load")
  done
  median[$count]=$(printf '%s\n' "${loads[@]}" | median_of)
  ratio=$(awk -v a="${median[$count]}" -v b="${median[1]}" 'BEGIN {printf "%.1f", a / b}')
  printf '| %d | %.1f | %s |\n' "$count" "${median[$count]}" "$ratio"
done
