#!/usr/bin/env bash
# Installs what the real-model benchmarks and the ONNX Runtime comparison need (bench/):
# PyTorch, torchvision, onnx and scikit-learn from Debian 12 (to make the models and the digits
# example), and ONNX Runtime from npm's onnxruntime-node into bench/node_modules (the peer).
# Idempotent: when everything is already there it does nothing (no apt-get update, no network).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
  python3 python3-numpy python3-torch python3-torchvision python3-onnx python3-sklearn
  nodejs
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done
# npm comes with nodejs from some sources; only ask Debian for it when it is absent.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-bench-deps: all Debian packages already installed"
else
  echo "install-bench-deps: missing packages: ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo -n)
    if ! sudo -n true 2>/dev/null; then
      if [[ -t 0 ]]; then as_root=(sudo); else
        echo "install-bench-deps: error: not root and sudo needs a password (no terminal)." >&2
        echo "install-bench-deps: install these as root: apt-get install ${missing[*]}" >&2
        exit 1
      fi
    fi
  else
    echo "install-bench-deps: error: not root and sudo is not available." >&2
    echo "install-bench-deps: install these as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get)
  "${apt[@]}" update
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}"
  still_missing=()
  for pkg in "${missing[@]}"; do
    [[ "$pkg" == npm ]] && continue
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "installed" ]] || still_missing+=("$pkg")
  done
  if [[ ${#still_missing[@]} -gt 0 ]]; then
    echo "install-bench-deps: error: still missing after apt-get install: ${still_missing[*]}" >&2
    exit 1
  fi
  echo "install-bench-deps: installed ${missing[*]}"
fi

# ONNX Runtime for Node, pinned by bench/package-lock.json. ONNXRUNTIME_NODE_INSTALL=skip keeps
# its install script from downloading GPU binaries; the CPU library ships in the package.
if [[ -f bench/node_modules/onnxruntime-node/package.json ]] &&
    node -e "require('$(pwd)/bench/node_modules/onnxruntime-node')" >/dev/null 2>&1; then
  echo "install-bench-deps: onnxruntime-node already installed in bench/node_modules"
else
  echo "install-bench-deps: installing onnxruntime-node into bench/node_modules"
  (cd bench && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund)
fi
