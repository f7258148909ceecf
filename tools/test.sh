#!/usr/bin/env bash
# Builds sprig (installing missing Debian packages first) and runs the whole CTest suite; GPU tests
# skip themselves when no device is present. Ends with CTest's summary; exits non-zero on failure.
# Environment: SPRIG_BUILD_DIR, SPRIG_CUDA=OFF for the CPU-only build, SPRIG_JOBS (see build.sh).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SPRIG_BUILD_DIR:-$repo/build}"
jobs="${SPRIG_JOBS:-$(nproc)}"

"$repo/tools/build.sh"
exec ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
