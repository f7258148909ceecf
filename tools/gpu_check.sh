#!/usr/bin/env bash
# The check to run on a GPU machine (docs/architecture.md §9), in under 8 minutes on one H200:
# CUDA build into build-gpu/ (reused when present), the `gpu` tests (the cuDNN backend's among
# them), `sprig bench ops`, `sprig bench draft` (packed against padded draft steps, MFU, Domino and
# JetSpec against DFlash), `sprig bench gru` and `sprig bench step` (prefix-tree against naive
# rollout steps, Qwen3-0.6B) on the device, then the attention benchmark: sprig's kernels and its
# cuDNN backend against PyTorch's SDPA and FlexAttention (tools/bench/attention_vs_torch.py; up to
# 4 more minutes, most of it FlexAttention's compilation). Full logs go to ${OUT:-gpu_out}/; the
# benchmark tables and a summary of every step are printed last. Exits non-zero when a step fails.
# Environment: SPRIG_BUILD_DIR (default <repo>/build-gpu), SPRIG_JOBS.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-gpu_out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export SPRIG_BUILD_DIR="${SPRIG_BUILD_DIR:-$repo/build-gpu}" SPRIG_CUDA=ON
sprig="$SPRIG_BUILD_DIR/tools/sprig"

summary=()
failed=0
# step NAME LOG TIMEOUT_S COMMAND...: runs the command with its output in LOG, records the result.
step() {
  local name="$1" log="$out/$2" limit="$3" status=ok start=$SECONDS
  shift 3
  timeout "$limit" "$@" >"$log" 2>&1 || { status="FAILED (exit $?)"; failed=1; }
  summary+=("$(printf '%-10s %-16s %5ss  %s' "$name" "$status" $((SECONDS - start)) "$log")")
}

gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo 'no GPU listed by nvidia-smi')"
echo "$gpu" >"$out/gpu.txt"
step build build.log 300 "$repo/tools/build.sh"
if ((failed == 0)); then
  step gpu-tests ctest.log 120 ctest --test-dir "$SPRIG_BUILD_DIR" -L gpu --no-tests=error \
    --output-on-failure -j 4
  step bench bench_ops.log 60 "$sprig" bench ops --device cuda
  step draft bench_draft.log 60 "$sprig" bench draft --device cuda
  step gru bench_gru.log 60 "$sprig" bench gru --device cuda
  step step bench_step.log 90 "$sprig" bench step --device cuda --reps 3
  step attention bench_attention.log 240 python3 "$repo/tools/bench/attention_vs_torch.py" \
    --sprig "$sprig" --reps 10
fi

echo "== sprig gpu_check on ${gpu%%$'\n'*}"
[[ ! -s "$out/bench_ops.log" ]] || cat "$out/bench_ops.log"
[[ ! -s "$out/bench_draft.log" ]] || cat "$out/bench_draft.log"
[[ ! -s "$out/bench_gru.log" ]] || cat "$out/bench_gru.log"
[[ ! -s "$out/bench_step.log" ]] || cat "$out/bench_step.log"
[[ ! -s "$out/bench_attention.log" ]] || cat "$out/bench_attention.log"
[[ ! -s "$out/ctest.log" ]] || sed -n '/tests passed/,$p' "$out/ctest.log"
printf '%s\n' "${summary[@]}"
exit "$failed"
