#!/usr/bin/env bash
# Installs kiln's build and test dependencies from Debian 12 packages. Idempotent: when every
# package is already installed it does nothing (no `apt-get update`, no network).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/apt_packages.sh"

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libflatbuffers-dev flatbuffers-compiler nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libxxhash-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-headers
  libonnx-dev libprotobuf-dev protobuf-compiler
  clang libclang-rt-14-dev
  python3 python3-numpy
)

apt_install_missing install-deps "${PACKAGES[@]}"
