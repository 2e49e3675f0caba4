#!/usr/bin/env bash
# Stages the Python package the GPU run's FlashInfer peer needs into .whl/ (.gitignore
# ignores it; it travels to the GPU machine with the build folder): FlashInfer 0.3.1 as a
# wheel built here from its PyPI source distribution (Python and CUDA sources, no compiled code;
# it JIT-compiles its kernels on the GPU machine). Building the wheel here leaves nothing to
# build there, where no package index is reachable. FlashInfer's other requirements are in the
# GPU machine's image (device/KINDS.md): torch, numpy, ninja, requests, jinja2, filelock,
# packaging, einops, click, tqdm, tabulate, and nvidia-ml-py (which provides the pynvml module);
# nvidia-cudnn-frontend is only imported when present.
#   bench/stage_peer_wheels.sh [WHEEL_DIR (.whl)]
# run_gpu.sh installs the wheel with pip --no-index --no-deps --target.
set -euo pipefail

VERSION=0.3.1
WHEEL_DIR=${1:-.whl}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The source distribution's build backend needs setuptools >= 77 and packaging >= 24; pip
# prepares its metadata even to download it, so both steps run in a venv that has them.
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip "setuptools>=77" "packaging>=24" wheel
"$work/venv/bin/python" -m pip download -q --no-deps --no-build-isolation --no-binary=:all: \
  -d "$work" "flashinfer-python==$VERSION"
mkdir -p "$WHEEL_DIR"
rm -f "$WHEEL_DIR"/flashinfer_python-*.whl  # one version only: two stop the install
"$work/venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation --no-index \
  -w "$WHEEL_DIR" "$work/flashinfer_python-$VERSION.tar.gz"

wheel=$(ls "$WHEEL_DIR"/flashinfer_python-"$VERSION"-py3-none-any.whl)
# The JIT needs the headers and sources the wheel carries as package data.
for part in flashinfer/data/include/flashinfer flashinfer/data/csrc \
  flashinfer/data/cutlass/include; do
  unzip -l "$wheel" "$part/*" >/dev/null || { echo "$wheel lacks $part" >&2; exit 1; }
done
echo "requirements (installed on the GPU machine, not staged):"
unzip -p "$wheel" '*/METADATA' | sed -n 's/^Requires-Dist: /  /p'
du -ch "$WHEEL_DIR"/*.whl
