#!/usr/bin/env bash
# Copies what the GPU run needs from a build folder into a small one that fits what travels to
# a remote GPU machine (64 MiB in all; a full build folder is larger): the GPU test binaries
# (tests/*_gpu_test), GPU benchmarks (bench/*_bench but cpu_*), the CLI (turbodecode) and the
# Python package (python/turbodecode) with their symbols stripped, the shared libraries they
# find through their run path (lib/),
# CMakeCache.txt and ctest's files, with the gtest cases already discovered here. run_gpu.sh
# uses build/gpu when build/release did not travel.
#   bench/stage_gpu_build.sh [BUILD (build/release)] [STAGE (build/gpu)]
set -euo pipefail

BUILD=${1:-build/release}
STAGE=${2:-build/gpu}

# Reading the ctest files runs gtest discovery (each test binary lists its cases; no GPU
# needed), so the *_tests.cmake files exist before they are copied.
ctest --test-dir "$BUILD" -N >/dev/null

rm -rf "$STAGE"
mkdir -p "$STAGE"
cp "$BUILD/CMakeCache.txt" "$STAGE/"
cp -r "$BUILD/lib" "$STAGE/"
# Executables first, ctest files after: discovery reruns when a *_tests.cmake file is older
# than its executable.
(cd "$BUILD" && find tests -maxdepth 1 -type f -name '*_gpu_test' &&
  find bench -maxdepth 1 -type f -name '*_bench' -not -name 'cpu_*' &&
  find . -maxdepth 1 -type f -name turbodecode) | while read -r exe; do
  mkdir -p "$STAGE/$(dirname "$exe")"
  strip -o "$STAGE/$exe" "$BUILD/$exe"
done
# The Python package: its extension and torch operator library (libturbodecode_torch.so, when
# built), stripped, beside copies of its Python files.
if compgen -G "$BUILD/python/turbodecode/_turbodecode*.so" >/dev/null; then
  mkdir -p "$STAGE/python/turbodecode"
  cp -L "$BUILD"/python/turbodecode/*.py "$STAGE/python/turbodecode/"
  for extension in "$BUILD"/python/turbodecode/*.so; do
    strip -o "$STAGE/python/turbodecode/$(basename "$extension")" "$extension"
  done
fi
for pattern in CTestTestfile.cmake '*_include.cmake' '*_tests.cmake'; do
  (cd "$BUILD" && find . -name "$pattern" -not -path '*/CMakeFiles/*') | while read -r file; do
    mkdir -p "$STAGE/$(dirname "$file")"
    cp "$BUILD/$file" "$STAGE/$file"
  done
done
du -sh "$STAGE"
