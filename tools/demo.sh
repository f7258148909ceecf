#!/usr/bin/env bash
# Builds sprig (installing missing Debian packages first) and runs its main job: for now the kernel
# benchmark `sprig bench ops` on the available device (CUDA when present, else CPU). Extra
# arguments go to the benchmark (e.g. --quick). Environment: as tools/build.sh.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SPRIG_BUILD_DIR:-$repo/build}"

"$repo/tools/build.sh"
exec "$build_dir/tools/sprig" demo "$@"
