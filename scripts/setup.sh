#!/usr/bin/env bash
# Installs the build dependencies (Debian packages) when any is missing, and the Python ones in
# .venv (scripts/setup_python.sh). Idempotent.
set -euo pipefail
packages=(cmake ninja-build g++ libgtest-dev libcli11-dev libfmt-dev nlohmann-json3-dev libhwy-dev
  python3 python3-dev python3-venv
  clang-16 libclang-rt-16-dev)  # clang: the sanitizer and fuzz build (preset sanitize)
# The aarch64 build (preset aarch64, tests under qemu-user): the cross compiler, arm64 libraries.
packages+=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64 libfmt-dev:arm64)
missing=()
native=$(dpkg --print-architecture)
for p in "${packages[@]}"; do
  # Once a package is installed for arm64 too, dpkg asks for the native one by its architecture.
  dpkg -s "$p" >/dev/null 2>&1 || dpkg -s "$p:$native" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
"$(dirname "$0")/setup_python.sh"
