#!/usr/bin/env bash
# Installs the Debian packages sprig needs (only the missing ones), then configures and builds sprig.
# Shared by tools/test.sh, tools/demo.sh and tools/gpu_check.sh; safe to run from any directory and
# any number of times. Environment:
#   SPRIG_BUILD_DIR  build directory (default: <repo>/build)
#   SPRIG_CUDA       ON or OFF to force the CUDA build (default: ON when nvcc is found)
#   SPRIG_JOBS       parallel compile jobs (default: number of CPUs)
#   SPRIG_CMAKE_ARGS more configure arguments, e.g. "-DSPRIG_CPU_ARCH=x86-64-v3" (split on spaces)
#   SPRIG_TARGETS    the targets to build, space-separated (default: all)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SPRIG_BUILD_DIR:-$repo/build}"
jobs="${SPRIG_JOBS:-$(nproc)}"

"$repo/tools/install_packages.sh" build-essential cmake ccache libeigen3-dev nlohmann-json3-dev \
  libyaml-cpp-dev libcli11-dev libgtest-dev libgmock-dev libpng-dev libpcre2-dev libicu-dev \
  pkg-config python3 openmpi-bin libopenmpi-dev

configure=(-S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release)
[[ -z "${SPRIG_CUDA:-}" ]] || configure+=("-DSPRIG_CUDA=$SPRIG_CUDA")
read -r -a extra <<<"${SPRIG_CMAKE_ARGS:-}"
cmake "${configure[@]}" "${extra[@]}"
read -r -a targets <<<"${SPRIG_TARGETS:-}"
sync=()  # make's -Oline: each compile's messages come out together, never interleaved
[[ ! -f "$build_dir/Makefile" ]] || sync=(-- -Oline)
cmake --build "$build_dir" -j "$jobs" ${targets[@]:+--target "${targets[@]}"} "${sync[@]}"
