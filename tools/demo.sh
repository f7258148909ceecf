#!/usr/bin/env bash
# Builds sprig (installing missing Debian packages first) and runs its main job, `sprig demo`: a
# tiny Qwen3 pre-trained on a synthetic corpus, then fine-tuned on shared-prefix rollouts with
# prefix-tree attention, on the available device (CUDA when present, else CPU). Extra arguments go
# to the demo (e.g. --quick). Environment: as tools/build.sh; OpenMP threads wait passively unless
# OMP_WAIT_POLICY says otherwise (spinning threads lose badly on a busy machine).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SPRIG_BUILD_DIR:-$repo/build}"

"$repo/tools/build.sh"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
exec "$build_dir/tools/sprig" demo "$@"
