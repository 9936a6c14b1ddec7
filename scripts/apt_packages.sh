# Sourced by scripts/install-deps.sh and scripts/install-bench-deps.sh: installs Debian packages
# that are missing, as root (directly, with `sudo -n`, or with `sudo` when there is a terminal).
#
#   source "$(dirname "${BASH_SOURCE[0]}")/apt_packages.sh"
#   apt_install_missing TOOL PACKAGE...
#
# Idempotent: when dpkg lists every package as installed it prints so and returns without
# `apt-get update` or any network access. Otherwise it runs `apt-get update` and
# `apt-get install --no-install-recommends` on the missing ones, then checks them again.
# Failures print `TOOL: error: ...` (with the apt-get command to run as root) and exit 1.

apt_package_installed() {
  [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true) == installed ]]
}

apt_install_missing() {
  local tool=$1 pkg
  shift
  local missing=()
  for pkg in "$@"; do
    apt_package_installed "$pkg" || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "$tool: all $# Debian packages already installed"
    return 0
  fi
  echo "$tool: missing packages: ${missing[*]}"

  local as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "$tool: error: not root and sudo is not available." >&2
      echo "$tool: install these as root: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    as_root=(sudo -n)
    if ! sudo -n true 2>/dev/null; then
      # Allow an interactive password prompt when there is a terminal.
      if [[ ! -t 0 ]]; then
        echo "$tool: error: not root and sudo needs a password (no terminal)." >&2
        echo "$tool: install these as root: apt-get install ${missing[*]}" >&2
        exit 1
      fi
      as_root=(sudo)
    fi
  fi

  local apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get)
  "${apt[@]}" update
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}"

  local still_missing=()
  for pkg in "${missing[@]}"; do
    apt_package_installed "$pkg" || still_missing+=("$pkg")
  done
  if [[ ${#still_missing[@]} -gt 0 ]]; then
    echo "$tool: error: still missing after apt-get install: ${still_missing[*]}" >&2
    exit 1
  fi
  echo "$tool: installed ${missing[*]}"
}
