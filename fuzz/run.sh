#!/usr/bin/env bash
# Runs every fuzz target of a TURBODECODE_FUZZ build on its seed corpus (docs/fuzzing.md):
#   fuzz/run.sh build/sanitize -max_total_time=60    # about a minute each (CI)
#   fuzz/run.sh build/sanitize -runs=1000000         # a million executions each
# FUZZ_TARGETS="cli api" picks targets. New inputs go to a scratch directory (the tree's corpus
# stays as it is); a finding stops the run and leaves its input in <build>/fuzz/findings/.
# Paths are absolute: the CLI harness changes its working directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
shift
findings="$build/fuzz/findings"
mkdir -p "$findings"
for target in ${FUZZ_TARGETS:-npy safetensors cli api}; do
  case $target in
    cli) max_len=16384 ;;
    api) max_len=1024 ;;
    *) max_len=4096 ;;
  esac
  dict=()
  [ -f "$here/dicts/$target.dict" ] && dict=("-dict=$here/dicts/$target.dict")
  scratch=$(mktemp -d)
  echo "== ${target}_fuzzer"
  "$build/fuzz/${target}_fuzzer" "$@" -max_len=$max_len -timeout=25 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/$target-" "${dict[@]}" \
    "$scratch" "$here/corpus/$target"
  rm -rf "$scratch"
done
