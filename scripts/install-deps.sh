#!/usr/bin/env bash
# Installs kiln's build and test dependencies from Debian 12 packages. Idempotent: when every
# package is already installed it does nothing (no `apt-get update`, no network).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libflatbuffers-dev flatbuffers-compiler nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libxxhash-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-headers
  libonnx-dev libprotobuf-dev protobuf-compiler
  clang libclang-rt-14-dev
  python3 python3-numpy
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "install-deps: missing packages: ${missing[*]}"

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo -n)
  if ! sudo -n true 2>/dev/null; then
    # Allow an interactive password prompt when there is a terminal.
    if [[ -t 0 ]]; then as_root=(sudo); else
      echo "install-deps: error: not root and sudo needs a password (no terminal)." >&2
      echo "install-deps: install these as root: apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
else
  echo "install-deps: error: not root and sudo is not available." >&2
  echo "install-deps: install these as root: apt-get install ${missing[*]}" >&2
  exit 1
fi

apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get)
"${apt[@]}" update
"${apt[@]}" install -y --no-install-recommends "${missing[@]}"

still_missing=()
for pkg in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || still_missing+=("$pkg")
done
if [[ ${#still_missing[@]} -gt 0 ]]; then
  echo "install-deps: error: still missing after apt-get install: ${still_missing[*]}" >&2
  exit 1
fi
echo "install-deps: installed ${missing[*]}"
