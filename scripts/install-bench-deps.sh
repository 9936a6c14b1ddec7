#!/usr/bin/env bash
# Installs what the real-model benchmarks and the ONNX Runtime comparison need (bench/):
# PyTorch, torchvision, onnx and scikit-learn from Debian 12 (to make the models and the digits
# example), and ONNX Runtime from npm's onnxruntime-node into bench/node_modules (the peer).
# Idempotent: when everything is already there it does nothing (no apt-get update, no network).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/apt_packages.sh

PACKAGES=(
  python3 python3-numpy python3-torch python3-torchvision python3-onnx python3-sklearn
  nodejs
)
# npm comes with nodejs from some sources; only ask Debian for it when it is absent.
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(npm)
fi

apt_install_missing install-bench-deps "${PACKAGES[@]}"

# ONNX Runtime for Node, pinned by bench/package-lock.json. ONNXRUNTIME_NODE_INSTALL=skip keeps
# its install script from downloading GPU binaries; the CPU library ships in the package.
if [[ -f bench/node_modules/onnxruntime-node/package.json ]] &&
    node -e "require('$(pwd)/bench/node_modules/onnxruntime-node')" >/dev/null 2>&1; then
  echo "install-bench-deps: onnxruntime-node already installed in bench/node_modules"
else
  echo "install-bench-deps: installing onnxruntime-node into bench/node_modules"
  (cd bench && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund)
fi
