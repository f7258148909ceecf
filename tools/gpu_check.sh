#!/usr/bin/env bash
# The check to run on a GPU machine (README.md, "GPU checks"), in stages that fit its time:
#
#   tools/gpu_check.sh --bundle FILE [--stage 1|2|all]   a bundle of tools/gpu_bundle.sh: nothing
#                                                        is built or installed, no network is used
#   tools/gpu_check.sh [--stage 1|2|all]                 builds here first (tools/build.sh, into
#                                                        build-gpu/; needs the Debian packages)
#
# Stage 1, correctness, under 5 minutes: every GPU test binary (sharded over the CPUs; a skipped
# test is a failure), then 20 steps of `sprig train` for each recipe (SFT on packed documents, SFT
# on folded rollouts, DFlash, Domino, JetSpec) on a small Qwen3 with head dim 128, on CUDA in bf16
# and on the CPU in f32: the first step's losses agree within bf16's tolerance and the CUDA loss
# falls. Stage 2, speed, under 4 minutes: sprig bench ops, bench attention (sprig's kernels and
# the cuDNN backend), tools/bench/attention_vs_torch.py against PyTorch's SDPA and FlexAttention,
# bench draft and bench step, on the device. `--stage all` (the default) runs both.
#
# It first prints what it found: the GPU and driver, the CUDA runtime, the cuDNN loaded, glibc. A
# bundle's libraries come from its lib/, the CUDA toolkit's and the nvidia/*/lib folders of the
# python3 there; a cuDNN missing there, or a build without the cuDNN backend, fails the check. Each
# step has its own time limit, and each stage a budget its steps never pass (290 s and 235 s: both
# stages fit one 10-minute call); each stage ends with a table (step, result, seconds, headline)
# and its full log in $OUT (default gpu_out/): env.txt, stage1.log, stage2.log, summary.txt. Exits
# non-zero when a step fails.
#
# --no-device-expected (what tools/gpu_bundle.sh --check uses on a machine without a GPU): a step
# passes when it ends with sprig's "no CUDA device" message; CPU work still runs and must pass.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="" stage=all no_device=0
die() {  # a runtime failure (exit 1); usage errors exit 2
  echo "sprig: [gpu_check] $1" >&2
  exit "${2:-1}"
}
usage_error() { die "$1" 2; }
while (($#)); do
  case "$1" in
    --bundle) bundle="${2:?--bundle needs a file}" && shift ;;
    --stage) stage="${2:?--stage needs 1, 2 or all}" && shift ;;
    --no-device-expected) no_device=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    *) usage_error "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ "$stage" =~ ^(1|2|all)$ ]] || usage_error "--stage must be 1, 2 or all, got '$stage'"
[[ -z "$bundle" || -f "$bundle" ]] || usage_error "no bundle at '$bundle'"

out="${OUT:-gpu_out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The binaries, and the tree (configs, scripts) the stages run from.
if [[ -n "$bundle" ]]; then
  tar -C "$work" -xf "$bundle" || die "$bundle is not a bundle (tar could not unpack it)"
  tree="$work/sprig-gpu"
  bin="$tree/bin"
  gpu_tests=("$bin"/*_gpu_tests)
  libs="$tree/lib"
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ ! -d "$dir" ]] || libs+=":$dir"
  done
  # The nvidia-* wheels (cuDNN, NCCL, cuBLAS, the CUDA runtime) of the python3 there.
  wheels="$(python3 - 2>/dev/null <<'EOF' || true
import glob, os, nvidia
roots = list(nvidia.__path__)
print(":".join(sorted({d for r in roots for d in glob.glob(os.path.join(r, "*", "lib")) +
                       glob.glob(os.path.join(r, "*", "*", "lib"))})))
EOF
)"
  [[ -z "$wheels" ]] || libs+=":$wheels"
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export SPRIG_SOURCE_DIR="$tree"  # where the test binaries find their fixtures
else
  export SPRIG_BUILD_DIR="${SPRIG_BUILD_DIR:-$repo/build-gpu}" SPRIG_CUDA=ON
  "$repo/tools/build.sh" >"$out/build.log" 2>&1 || die "the build failed (log: $out/build.log)"
  tree="$repo"
  bin="$SPRIG_BUILD_DIR/tools"
  gpu_tests=("$SPRIG_BUILD_DIR"/tests/*_gpu_tests)
fi
sprig="$bin/sprig"
cd "$tree"
export OMP_WAIT_POLICY=passive

# ---- what this machine has ---------------------------------------------------------------------
if [[ -n "$bundle" ]]; then  # the bundle's libstdc++ needs the glibc it was built against
  needed=$(sed -n 's/^newest symbol versions needed: GLIBC_\([0-9.]*\).*/\1/p' "$tree/MANIFEST")
  here=$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)
  [[ "$(printf '%s\n' "$needed" "$here" | sort -V | head -n 1)" == "$needed" ]] ||
    die "the bundle needs glibc $needed, this machine has $here: build it on an older system"
fi
{
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    2>/dev/null || echo 'none (nvidia-smi lists none)')"
  echo "glibc: $(getconf GNU_LIBC_VERSION)"
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
  [[ -z "$bundle" ]] || echo "bundle: $(sed -n 2p "$tree/MANIFEST")"
  echo "library path: ${LD_LIBRARY_PATH:-}"
  echo "cuDNN file: $(ldd "$sprig" | awk '/libcudnn\.so/ { print $3 }')"
  "$sprig" --version
} >"$out/env.txt" 2>&1 || {
  cat "$out/env.txt"
  die "sprig does not start here (see above)"
}
cat "$out/env.txt"
grep -q 'cuDNN attention backend: built' "$out/env.txt" ||
  die "this sprig was built without the cuDNN backend: its checks would not run"
grep -q 'loaded [1-9]' "$out/env.txt" || die "no cuDNN library was loaded"

# ---- steps -------------------------------------------------------------------------------------
rows=()  # the stage's table
failed=0
log="" deadline=0  # the stage's log file and the end of its time budget (in $SECONDS)

# record NAME RESULT SECONDS HEADLINE: one row of the table (a result not starting with "ok"
# fails the check).
record() {
  rows+=("$(printf '%-22s %-20s %4s s  %s' "$1" "$2" "$3" "$4")")
  [[ "$2" == ok* ]] || failed=1
}

# outcome EXIT_CODE FILE: "ok", or "ok (no CUDA device)" for device work where that is expected
# (cpu_work=1 marks work that must pass anyway), else "FAILED (...)".
outcome() {
  if ((no_device && !${cpu_work:-0})); then
    if grep -q 'no CUDA device' "$2" && ! grep -q '^\[  FAILED  \]' "$2"; then
      echo "ok (no CUDA device)"
    else
      echo "FAILED (exit $1)"
    fi
  elif (($1 == 0)); then
    echo ok
  elif (($1 == 124)); then
    echo "FAILED (time limit)"
  else
    echo "FAILED (exit $1)"
  fi
}

# The time left to the stage (its budget starts with start_stage), at most $1 seconds.
time_left() {
  local left=$((deadline - SECONDS))
  echo $((left < $1 ? left : $1))
}

# step NAME LIMIT_S COMMAND...: runs the command within its limit and the stage's time, with its
# output in the stage's log; the headline is the output's last line.
step() {
  local name="$1" limit start=$SECONDS status=0 file="$work/$1.out"
  limit=$(time_left "$2")
  shift 2
  if ((limit <= 0)); then
    record "$name" "FAILED (stage time spent)" 0 ""
    return
  fi
  timeout "$limit" "$@" >"$file" 2>&1 || status=$?
  { echo "==== $name: $*" && cat "$file"; } >>"$log"
  record "$name" "$(outcome "$status" "$file")" $((SECONDS - start)) \
    "$(grep -v '^\s*$' "$file" | tail -n 1 | cut -c1-70)"
}

# One GPU test binary in shards run side by side, each within LIMIT_S seconds and with THREADS
# OpenMP threads; the last line counts the tests. Fails when a shard does or (with a device) when
# a test was skipped.
gpu_test_binary() {
  local binary="$1" shards="$2" threads="$3" limit="$4" i status=0 name="${1##*/}"
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=$threads \
      timeout "$limit" "$binary" --gtest_brief=1 >"$work/$name.$i" 2>&1 &
  done
  for ((i = 0; i < shards; i++)); do wait -n || status=$?; done
  cat "$work/$name".[0-9]*
  local counts passed failed skipped
  counts=$(cat "$work/$name".[0-9]* | awk '
    /^\[  PASSED  \] [0-9]+ test/ { passed += $4 }
    /^\[  SKIPPED \] [0-9]+ test/ { skipped += $4 }
    /^\[  FAILED  \] [0-9]+ test/ { failed += $4 }
    END { printf "%d %d %d", passed, failed, skipped }')
  read -r passed failed skipped <<<"$counts"
  echo "$passed passed, $failed failed, $skipped skipped ($shards shards)"
  ((status == 0 && (no_device || skipped == 0))) || return "$((status ? status : 1))"
}

# Every GPU test binary at once, sharded over the CPUs (the GPU has room for all of them).
gpu_tests_stage() {
  local binary shards=$((($(nproc) + 3) / 4)) pids=() start=$SECONDS
  local threads=$((($(nproc) + ${#gpu_tests[@]} * shards - 1) / (${#gpu_tests[@]} * shards)))
  for binary in "${gpu_tests[@]}"; do
    gpu_test_binary "$binary" "$shards" "$threads" "$(time_left 150)" >"$work/${binary##*/}.out" 2>&1 &
    pids+=($!)
  done
  local i status file
  for i in "${!pids[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    file="$work/$(basename "${gpu_tests[$i]}").out"
    { echo "==== ${gpu_tests[$i]##*/}" && cat "$file"; } >>"$log"
    record "${gpu_tests[$i]##*/}" "$(outcome "$status" "$file")" $((SECONDS - start)) \
      "$(tail -n 1 "$file")"
  done
}

# One recipe, 20 steps on CUDA in bf16 and on the CPU in f32, the losses compared.
recipes=(sft rollouts dflash domino jetspec)
train_recipe() {
  local recipe="$1" command=sft model=model
  [[ "$recipe" == sft || "$recipe" == rollouts ]] || command="$recipe" model=target
  local dtype_key=model
  [[ $model == model ]] || dtype_key=draft
  local args=(train "$command" -c "train/configs/tiny_$recipe.yaml"
    "--$model.config=tools/gpu_check/qwen3_hd128.json" --train.max_steps=20 --log.every_steps=1
    --checkpoint.every_steps=1000)
  cpu_work=1 step "$recipe-cpu" 30 "$sprig" "${args[@]}" --device=cpu "--$dtype_key.dtype=f32" \
    "--run_dir=$work/runs/$recipe-cpu"
  step "$recipe-cuda" 40 "$sprig" "${args[@]}" --device=cuda "--$dtype_key.dtype=bf16" \
    "--run_dir=$work/runs/$recipe-cuda"
  ((no_device)) && return
  step "$recipe-loss" 10 python3 tools/gpu_check/compare_losses.py \
    "$work/runs/$recipe-cuda/metrics.jsonl" "$work/runs/$recipe-cpu/metrics.jsonl"
}

# start_stage N SECONDS: the stage's log and time budget.
start_stage() {
  log="$out/stage$1.log"
  : >"$log"
  deadline=$((SECONDS + $2))
}

# finish_stage N: prints the stage's table (and appends it to summary.txt).
finish_stage() {
  {
    echo "== stage $1 (GPU: $(sed -n 's/^GPU: //p' "$out/env.txt"))"
    printf '%s\n' "${rows[@]}"
  } | tee -a "$out/summary.txt"
  rows=()
}

: >"$out/summary.txt"
if [[ "$stage" == 1 || "$stage" == all ]]; then
  start_stage 1 290
  gpu_tests_stage
  for recipe in "${recipes[@]}"; do train_recipe "$recipe"; done
  finish_stage 1
fi
if [[ "$stage" == 2 || "$stage" == all ]]; then
  start_stage 2 235
  step bench-ops 30 "$sprig" bench ops --device cuda
  step bench-attention 40 "$sprig" bench attention --device cuda --backend both
  step attention-vs-torch 80 python3 tools/bench/attention_vs_torch.py --sprig "$sprig" --reps 10
  step bench-draft 40 "$sprig" bench draft --device cuda
  step bench-step 50 "$sprig" bench step --device cuda --reps 3
  finish_stage 2
  cat "$log" | grep -v '^====' | tail -n 60
fi
exit "$failed"
