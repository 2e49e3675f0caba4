#!/usr/bin/env bash
# Makes .venv at the repository root with what the Python package needs to build in the CMake
# tree and to be tested there (nanobind, scikit-build-core, numpy, pytest), and torch too with
# TURBODECODE_SETUP_TORCH=1 (a large download). The build picks .venv up by itself
# (python/CMakeLists.txt). PYTHON chooses the interpreter (default python3): the extension is
# built for that Python version. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
packages=(nanobind scikit-build-core numpy pytest)
[ "${TURBODECODE_SETUP_TORCH:-0}" = 1 ] && packages+=(torch)
.venv/bin/python -m pip install -q --disable-pip-version-check "${packages[@]}"
