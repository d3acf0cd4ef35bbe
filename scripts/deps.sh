#!/usr/bin/env bash
# Installs what building and testing fp4moe needs, and only what is missing:
#   apt: cmake ninja-build g++ libgtest-dev nlohmann-json3-dev libcli11-dev python3-pip
#   pip: numpy pytest nanobind scikit-build-core
# Safe to run again (does nothing when all is present). Runs as root or through sudo.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

apt_pkgs=(cmake ninja-build g++ libgtest-dev nlohmann-json3-dev libcli11-dev python3-pip)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
else
  echo "deps: apt packages present"
fi

# pip package -> the module it installs
declare -A py_mods=([numpy]=numpy [pytest]=pytest [nanobind]=nanobind [scikit-build-core]=scikit_build_core)
py_missing=()
for p in "${!py_mods[@]}"; do
  python3 -c "import ${py_mods[$p]}" 2>/dev/null || py_missing+=("$p")
done
if [ ${#py_missing[@]} -gt 0 ]; then
  echo "deps: pip install ${py_missing[*]}"
  # Debian marks the system Python externally managed (PEP 668); these are build and
  # test tools, so install them there anyway when plain pip refuses.
  python3 -m pip install -q "${py_missing[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${py_missing[@]}"
else
  echo "deps: python packages present"
fi
