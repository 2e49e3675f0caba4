#!/usr/bin/env bash
# The one GPU run: from the repository root on the GPU machine, with build/release
# (built elsewhere with the CUDA backend on) carried along. Steps, in order of importance:
#   smi        nvidia-smi
#   ctest      ctest -L gpu (every *_gpu_test)
#   bench      build/release/bench/attention_bench (bandwidth, decode, append) -> JSON
#   shard      build/release/bench/sharded_decode_bench (R ranks on the same context)
#   peer       bench/peers/sdpa_peer.py (PyTorch SDPA on the same shapes)    -> JSON
#   flashinfer bench/peers/flashinfer_peer.py (FlashInfer paged decode, F16 and FP8 KV, on the
#              same shapes, and its fidelity on the main job's data), after installing
#              .whl/*.whl (bench/stage_peer_wheels.sh stages them) -> JSON
#   cli        the CLI on the GPU: turbodecode --device cuda --json, once per K format with
#              every V format (the main job: per-format fidelity -> fidelity_k_<K>.json) and
#              turbodecode hc --device cuda, when the build has the CLI
#   report     bench/report_attention.py and bench/report_formats.py        -> markdown + PNG
#   hc         build/release/bench/hc_bench and bench/peers/hc_torch.py, when present
#   python     pytest python/tests (CUDA tensors, torch.compile, CUDA graphs) and
#              bench/python_overhead.py, when the build has the Python extension (built for
#              this machine's python3)
#   memcheck   compute-sanitizer memcheck on every *_gpu_test binary
#   racecheck  compute-sanitizer racecheck on the *Sanitizer* tests of each binary
#   synccheck  compute-sanitizer synccheck on the same subset
# Each step has a time limit and the whole run a budget (BUDGET_S, default 540 s); a step
# that fails or times out is recorded and the run goes on. Skip a step with SKIP_<STEP>=1
# (e.g. SKIP_SANITIZER=1 skips all three sanitizer steps, SKIP_MEMCHECK=1 one of them).
# QUICK=1 runs the benchmarks in their --quick mode. WHEELS (default .whl) holds the staged
# wheels and FlashInfer's JIT cache: FLASHINFER_JIT_CACHE (default $WHEELS/flashinfer_jit.tar.xz)
# is loaded when present. Outputs (at most 8 files) go to the first argument, or to $OUT, or to
# ./gpu-out:
#   gpu_run.log      every step's output, concatenated      summary.txt  the step table
#   attention_report.md  attention_gbps.png  formats_report.md  formats_tradeoff.png
#   bench_json.tar.gz  every JSON: attention_bench, sdpa_peer, flashinfer_peer, fidelity_k_* (the
#                      CLI's), hc_bench and hc_torch (when those programs write JSON)
#   flashinfer_jit.tar.xz  FlashInfer's modules, when this run compiled any: copy it to
#                      $WHEELS/ so the next run loads them instead of compiling
set -u

BUILD=${BUILD:-build/release}
WHEELS=${WHEELS:-.whl}
JIT_CACHE=${FLASHINFER_JIT_CACHE:-$WHEELS/flashinfer_jit.tar.xz}
# The slim copy bench/stage_gpu_build.sh makes, when the full build folder did not travel.
[[ ! -e "$BUILD/CMakeCache.txt" && -e build/gpu/CMakeCache.txt ]] && BUILD=build/gpu
OUT_DIR=${1:-${OUT:-gpu-out}}
BUDGET_S=${BUDGET_S:-540}
QUICK_FLAG=""
[[ "${QUICK:-0}" == 1 ]] && QUICK_FLAG="--quick"
SANITIZER_FILTER=${SANITIZER_FILTER:-*Sanitizer*}
export PYTHONUNBUFFERED=1
export PATH="$PATH:/usr/local/cuda/bin"  # compute-sanitizer

mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
# JSON results gather here and leave as one tarball (a remote run brings back at most 8 files).
JSON_DIR="$OUT_DIR/json"
mkdir -p "$JSON_DIR"
SCRATCH=$(mktemp -d)
PEER_SITE="$SCRATCH/site"
LOG="$OUT_DIR/gpu_run.log"
SUMMARY="$OUT_DIR/summary.txt"
: >"$LOG"
START=$(date +%s)
STEP_ROWS=()
FAILED=0

remaining() { echo $((BUDGET_S - ($(date +%s) - START))); }

# run_step NAME SKIP_VARIABLE LIMIT_S COMMAND...: runs COMMAND under `timeout`, appending its
# output to the log, and records OK / FAIL(rc) / TIMEOUT / SKIPPED with the seconds taken.
run_step() {
  local name=$1 skip_var=$2 limit=$3
  shift 3
  if [[ "${!skip_var:-0}" == 1 ]]; then
    STEP_ROWS+=("$(printf '%-34s %-10s %6s' "$name" SKIPPED -)")
    return 0
  fi
  local left
  left=$(remaining)
  if ((left < 15)); then
    STEP_ROWS+=("$(printf '%-34s %-10s %6s' "$name" NO-TIME -)")
    FAILED=1
    return 0
  fi
  ((limit > left)) && limit=$left
  local t0 status rc
  t0=$(date +%s)
  {
    echo
    echo "======== $name (limit ${limit}s) ========"
    echo "\$ $*"
  } >>"$LOG"
  timeout --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  rc=$?
  case $rc in
    0) status=OK ;;
    124 | 137) status=TIMEOUT ;;
    *) status="FAIL($rc)" ;;
  esac
  [[ $status != OK ]] && FAILED=1
  STEP_ROWS+=("$(printf '%-34s %-10s %6s' "$name" "$status" "$(($(date +%s) - t0))s")")
  echo "[$(printf '%4ss' "$(($(date +%s) - START))")] $name: $status"
}

gpu_test_binaries() {
  find "$BUILD/tests" -maxdepth 1 -type f -name '*_gpu_test' -perm -u+x 2>/dev/null | sort
}

# Prints "--json" and PATH (one per line) when the program's sources (the files given) mention
# a --json option; running the program to ask would start its benchmark.
json_args_for() {
  local path=$1
  shift
  if cat "$@" 2>/dev/null | grep -q -- '--json'; then printf '%s\n' --json "$path"; fi
}

# ctest files hold the absolute paths of the machine that configured the build: when this
# checkout sits elsewhere, make that source path lead here, and the configured build folder
# lead to the one used now.
configured() { sed -n "s/^$1:INTERNAL=//p" "$BUILD/CMakeCache.txt" 2>/dev/null; }
configured_source=$(configured CMAKE_HOME_DIRECTORY)
configured_build=$(configured CMAKE_CACHEFILE_DIR)
if [[ -n "$configured_source" && ! -e "$configured_source" ]]; then
  mkdir -p "$(dirname "$configured_source")" && ln -s "$PWD" "$configured_source"
fi
if [[ -n "$configured_build" && ! -e "$configured_build" ]]; then
  mkdir -p "$(dirname "$configured_build")" && ln -s "$(cd "$BUILD" && pwd)" "$configured_build"
fi

run_step "nvidia-smi" SKIP_SMI 20 nvidia-smi
run_step "ctest -L gpu" SKIP_CTEST 150 \
  ctest --test-dir "$BUILD" -L gpu --output-on-failure -j 8 --timeout 120
# When ctest itself cannot run the tests here (test discovery needs the configuring machine's
# CMake modules), run the GPU test binaries directly so their results still come back.
if [[ "${STEP_ROWS[-1]}" != *" OK "* && "${SKIP_CTEST:-0}" != 1 ]]; then
  for binary in $(gpu_test_binaries); do
    run_step "direct $(basename "$binary")" SKIP_CTEST 120 "$binary" --gtest_brief=1
  done
fi

BENCH="$BUILD/bench/attention_bench"
SHAPES="$SCRATCH/shapes.json"
run_step "attention_bench" SKIP_BENCH 200 \
  "$BENCH" $QUICK_FLAG --json "$JSON_DIR/attention_bench.json"
# Sharded decode over R ranks (SPEC §2.10): through NCCL over the GPUs when there are several,
# else R streams of this GPU in one process (the sharding's own cost).
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
SHARD_COMM=local
SHARD_RANKS=1,2,4
if ((GPUS > 1)); then SHARD_COMM=nccl SHARD_RANKS=$(seq -s, 1 "$GPUS"); fi
for shape in "1 1048576" "8 131072"; do
  read -r batch length <<<"$shape"
  run_step "sharded_decode_bench B=$batch L=$length" SKIP_SHARD 90 \
    "$BUILD/bench/sharded_decode_bench" --communicator $SHARD_COMM --ranks "$SHARD_RANKS" \
    --batch "$batch" --length "$length"
done
run_step "decode shapes (for the peers)" SKIP_SHAPES 20 "$BENCH" --list-shapes "$SHAPES" $QUICK_FLAG
run_step "sdpa_peer" SKIP_PEER 150 \
  python3 bench/peers/sdpa_peer.py --shapes "$SHAPES" --json "$JSON_DIR/sdpa_peer.json" $QUICK_FLAG
run_step "flashinfer wheels" SKIP_FLASHINFER 60 \
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$PEER_SITE" "$WHEELS"/flashinfer_python-*.whl
run_step "flashinfer_peer" SKIP_FLASHINFER 300 \
  env PYTHONPATH="$PEER_SITE" python3 bench/peers/flashinfer_peer.py --shapes "$SHAPES" \
  --json "$JSON_DIR/flashinfer_peer.json" --fidelity $QUICK_FLAG \
  --jit-cache-in "$JIT_CACHE" --jit-cache-out "$OUT_DIR/flashinfer_jit.tar.xz"
V_FORMATS=f16,fp8,tq3,tq4,tq5,tq6,tq8
if [[ -x "$BUILD/turbodecode" ]]; then
  for k_format in f16 fp8 tq4 tq8; do
    run_step "turbodecode --device cuda --json --k-format $k_format" SKIP_CLI 120 \
      bash -c '"$0" --device cuda --json --k-format "$1" --v-formats "$2" >"$3"' \
      "$BUILD/turbodecode" "$k_format" "$V_FORMATS" "$JSON_DIR/fidelity_k_$k_format.json"
  done
  run_step "turbodecode hc --device cuda" SKIP_CLI 60 "$BUILD/turbodecode" hc --device cuda
fi
fidelity_args=()
for f in "$JSON_DIR"/fidelity_k_*.json; do [[ -e $f ]] && fidelity_args+=(--fidelity "$f"); done
run_step "report_attention" SKIP_REPORT 30 \
  python3 bench/report_attention.py --ours "$JSON_DIR/attention_bench.json" \
  --peer "$JSON_DIR/sdpa_peer.json" --out "$OUT_DIR"
run_step "report_formats" SKIP_REPORT 30 \
  python3 bench/report_formats.py --ours "$JSON_DIR/attention_bench.json" \
  --flashinfer "$JSON_DIR/flashinfer_peer.json" --sdpa "$JSON_DIR/sdpa_peer.json" \
  "${fidelity_args[@]}" --out "$OUT_DIR"

if [[ -x "$BUILD/bench/hc_bench" ]]; then
  mapfile -t hc_args < <(json_args_for "$JSON_DIR/hc_bench.json" bench/hc_bench.c*)
  run_step "hc_bench" SKIP_HC 60 "$BUILD/bench/hc_bench" $QUICK_FLAG "${hc_args[@]}"
fi
if [[ -f bench/peers/hc_torch.py ]]; then
  mapfile -t hc_args < <(json_args_for "$JSON_DIR/hc_torch.json" bench/peers/hc_torch.py)
  run_step "hc_torch.py" SKIP_HC 90 python3 bench/peers/hc_torch.py $QUICK_FLAG "${hc_args[@]}"
fi

if compgen -G "$BUILD/python/turbodecode/_turbodecode*.so" >/dev/null; then
  run_step "pytest python/tests" SKIP_PYTHON 360 \
    env PYTHONPATH="$BUILD/python" python3 -m pytest -q -p no:cacheprovider python/tests
  run_step "python_overhead" SKIP_PYTHON 120 \
    env PYTHONPATH="$BUILD/python" python3 bench/python_overhead.py
fi

if [[ "${SKIP_SANITIZER:-0}" == 1 ]]; then
  STEP_ROWS+=("$(printf '%-34s %-10s %6s' "sanitizers" SKIPPED -)")
else
  for binary in $(gpu_test_binaries); do
    name=$(basename "$binary")
    # NCCL probes its kernels for other GPUs (cudaFuncGetAttributes failing on purpose): only
    # memory errors count in its test.
    api_errors=()
    [[ $name == nccl_* ]] && api_errors=(--report-api-errors no)
    run_step "memcheck $name" SKIP_MEMCHECK 90 \
      compute-sanitizer --tool memcheck "${api_errors[@]}" --error-exitcode 99 "$binary"
    # racecheck and synccheck run the binary's sanitizer subset; a binary without one is
    # covered by memcheck alone (the tools fail on a program that launches nothing).
    if ! "$binary" --gtest_list_tests --gtest_filter="$SANITIZER_FILTER" 2>/dev/null |
      grep -q '^  '; then
      continue
    fi
    run_step "racecheck $name" SKIP_RACECHECK 60 \
      compute-sanitizer --tool racecheck --error-exitcode 99 "$binary" \
      --gtest_filter="$SANITIZER_FILTER"
    run_step "synccheck $name" SKIP_SYNCCHECK 60 \
      compute-sanitizer --tool synccheck --error-exitcode 99 "$binary" \
      --gtest_filter="$SANITIZER_FILTER"
  done
fi
rm -rf "$SCRATCH"
tar -czf "$OUT_DIR/bench_json.tar.gz" -C "$JSON_DIR" . && rm -rf "$JSON_DIR"

{
  echo "GPU run: $(date -u +%FT%TZ), $(($(date +%s) - START)) s, build $BUILD"
  printf '%-34s %-10s %6s\n' step status time
  printf '%s\n' "${STEP_ROWS[@]}"
  # A GPU test that finds no device skips itself: make a run that only skipped visible.
  echo "ctest: $(grep -m1 'tests passed' "$LOG" || echo 'no result line'), $(grep -c '\*\*\*Skipped' "$LOG") skipped"
} >"$SUMMARY"
echo
[[ -f "$OUT_DIR/attention_report.md" ]] && cat "$OUT_DIR/attention_report.md"
echo
[[ -f "$OUT_DIR/formats_report.md" ]] && cat "$OUT_DIR/formats_report.md"
echo
cat "$SUMMARY"
echo "outputs in $OUT_DIR:" "$OUT_DIR"/*
exit $FAILED
