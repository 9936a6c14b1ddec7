# Sourced by bench/compare.sh and bench/run_bench.sh: the flags they share and making the
# real-model set when it is missing or out of date.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
#   bench_parse_args compare.sh "$@"    # cd to the repository root; sets MODELS, ONLY, PASS
#   bench_make_models compare.sh        # remakes what bench/models/cases.py says is stale
#
# --models DIR (default build/bench-models) is taken out of the arguments (the caller passes
# it on as an absolute path); --only NAME,... is read and also kept in PASS, which holds every
# other argument for the Node script. PYTHON (default /usr/bin/python3) must have torch,
# torchvision and onnx when models have to be made.

bench_fail() {
  echo "$1: error: $2" >&2
  exit "${3:-1}"
}

bench_parse_args() {
  local tool=$1
  shift
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  ROOT=$(pwd)
  MODELS="$ROOT/build/bench-models"
  PYTHON=${PYTHON:-/usr/bin/python3}
  ONLY=""
  PASS=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --models)
        [[ $# -ge 2 ]] || bench_fail "$tool" "--models needs a directory" 2
        MODELS=$(realpath -m "$2")
        shift 2
        ;;
      --only)
        [[ $# -ge 2 ]] || bench_fail "$tool" "--only needs NAME,..." 2
        ONLY=$2
        PASS+=("$1" "$2")
        shift 2
        ;;
      *)
        PASS+=("$1")
        shift
        ;;
    esac
  done
}

# Makes the models (of --only, or all) that MODELS lacks or whose models.json entry differs
# from bench/models/cases.py, and only those.
bench_make_models() {
  local tool=$1 stale
  [[ -x "$PYTHON" ]] || command -v "$PYTHON" >/dev/null ||
    bench_fail "$tool" "no Python at $PYTHON; run scripts/install-bench-deps.sh"
  stale=$("$PYTHON" bench/models/cases.py "$MODELS" --only "$ONLY") ||
    bench_fail "$tool" "bench/models/cases.py could not check $MODELS" 2
  [[ -n "$stale" ]] || return 0
  stale=$(echo "$stale" | paste -sd, -)
  if ! "$PYTHON" -c 'import torch, torchvision, onnx' 2>/dev/null; then
    bench_fail "$tool" "$PYTHON cannot import torch, torchvision and onnx; run $(
      )scripts/install-bench-deps.sh"
  fi
  echo "$tool: making the models $stale in $MODELS" >&2
  "$PYTHON" bench/models/make_models.py "$MODELS" --only "$stale"
}
