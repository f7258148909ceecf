#!/usr/bin/env bash
# The GPU scripts' host logic, without a bundle or a GPU: tools/gpu_check.sh's and
# tools/gpu_bundle.sh's argument errors, the bundle's refusal to replace a file that is not a
# bundle, the ptxas table (spills flagged on the dK/dV kernel at head dim 128), and
# tools/gpu_check/compare_losses.py's verdicts. Run by CTest (label cpu).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
passes=0 failures=0
# expect NAME EXIT_CODE PATTERN COMMAND...: the command exits with EXIT_CODE and prints PATTERN.
expect() {
  local name="$1" code="$2" pattern="$3" got=0
  shift 3
  "$@" >"$tmp/out" 2>&1 || got=$?
  if [[ $got != "$code" ]] || ! grep -qE -- "$pattern" "$tmp/out"; then
    echo "FAIL $name: exit $got (expected $code), output:"
    sed 's/^/  /' "$tmp/out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
    passes=$((passes + 1))
  fi
}

expect "check: bad stage" 2 "--stage must be 1, 2 or all, got '3'" \
  bash "$repo/tools/gpu_check.sh" --stage 3
expect "check: missing bundle" 2 "no bundle at '$tmp/none.tar.xz'" \
  bash "$repo/tools/gpu_check.sh" --bundle "$tmp/none.tar.xz"
expect "check: unknown argument" 2 "unknown argument '--fast'" bash "$repo/tools/gpu_check.sh" --fast
expect "bundle: unknown argument" 2 "unknown argument '--fast'" bash "$repo/tools/gpu_bundle.sh" --fast
expect "bundle: --check of nothing" 1 "no bundle at $tmp/none.tar.xz" \
  bash "$repo/tools/gpu_bundle.sh" --check "$tmp/none.tar.xz"
echo "precious" >"$tmp/notes.txt"
expect "bundle: refuses to replace another file" 1 "notes.txt exists and is not a sprig GPU bundle" \
  bash "$repo/tools/gpu_bundle.sh" --out "$tmp/notes.txt"
expect "bundle: that file is untouched" 0 "^precious$" cat "$tmp/notes.txt"

cat >"$tmp/build.log" <<'LOG'
ptxas info    : Compiling entry function '_ZN5sprig4cuda12_GLOBAL__N_121flash_bwd_dkdv_kernelI13__nv_bfloat16Li128EEEvNS0_9BwdParamsE' for 'sm_90a'
ptxas info    : Function properties for _ZN5sprig4cuda12_GLOBAL__N_121flash_bwd_dkdv_kernelI13__nv_bfloat16Li128EEEvNS0_9BwdParamsE
    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8 bytes cumulative stack size, 560 bytes cmem[0]
ptxas info    : Compiling entry function '_ZN5sprig4cuda12_GLOBAL__N_116flash_fwd_kernelI6__halfLi64EEEvNS0_9FwdParamsE' for 'sm_90a'
ptxas info    : Function properties for _ZN5sprig4cuda12_GLOBAL__N_116flash_fwd_kernelI6__halfLi64EEEvNS0_9FwdParamsE
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 1024 bytes smem, 560 bytes cmem[0]
LOG
expect "ptxas: dK/dV spills flagged" 0 \
  "flash_bwd_dkdv_kernel<bf16, 128> +255 regs +spill +12 B stored +16 B loaded +static smem +0 B  <- spills" \
  bash "$repo/tools/gpu_bundle.sh" --ptxas "$tmp/build.log"
expect "ptxas: forward figures" 0 "flash_fwd_kernel<f16, 64> +128 regs +spill +0 B stored +0 B loaded +static smem +1024 B$" \
  bash "$repo/tools/gpu_bundle.sh" --ptxas "$tmp/build.log"

# metrics FILE LOSS...: one metrics.jsonl line per loss.
metrics() {
  local file="$1" step=0 loss
  shift
  for loss in "$@"; do
    step=$((step + 1))
    echo "{\"step\": $step, \"loss\": $loss}"
  done >"$file"
}
falling=(4.19 4.0 3.9 3.8 3.7 3.5 3.3 3.1 2.9 2.7)
metrics "$tmp/cpu.jsonl" "${falling[@]}"
metrics "$tmp/cuda.jsonl" 4.21 "${falling[@]:1}"
expect "losses: within bf16's tolerance" 0 "^step 1: cuda 4.2100 cpu 4.1900; step 10: cuda 2.7000 cpu 2.7000$" \
  python3 "$repo/tools/gpu_check/compare_losses.py" "$tmp/cuda.jsonl" "$tmp/cpu.jsonl"
metrics "$tmp/cuda.jsonl" 4.5 "${falling[@]:1}"
expect "losses: first steps differ" 1 "first-step losses differ by 0.31" \
  python3 "$repo/tools/gpu_check/compare_losses.py" "$tmp/cuda.jsonl" "$tmp/cpu.jsonl"
metrics "$tmp/cuda.jsonl" 4.19 4.2 4.2 4.2 4.2 4.2 4.2 4.2 4.2 4.2
expect "losses: not falling" 1 "the CUDA loss does not fall" \
  python3 "$repo/tools/gpu_check/compare_losses.py" "$tmp/cuda.jsonl" "$tmp/cpu.jsonl"
metrics "$tmp/cuda.jsonl" 4.19 4.0
expect "losses: a short run" 1 "steps logged: cuda 2, cpu 10" \
  python3 "$repo/tools/gpu_check/compare_losses.py" "$tmp/cuda.jsonl" "$tmp/cpu.jsonl"

echo "$passes passed, $failures failed"
((failures == 0))
