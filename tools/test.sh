#!/usr/bin/env bash
# Builds sprig (installing missing Debian packages first), checks that every C++/CUDA source is
# formatted as .clang-format says, prints a one-line size report (lines per folder), then runs
# three stages:
#   1. the whole CTest suite; GPU tests skip themselves when no device is present;
#   2. the CPU suite again, built CPU-only by clang with AddressSanitizer and
#      UndefinedBehaviorSanitizer (-O1 -g1: line numbers in reports at about half of
#      RelWithDebInfo's compile time; in <build dir>-san), the slow label excluded (see README.md);
#   3. a short smoke run of every libFuzzer target of tools/fuzz on its committed seeds, built in
#      the same tree (the libraries the targets link are the sanitised ones of stage 2).
# Every stage runs; the script ends with one line per stage and exits non-zero when a stage fails
# or a source differs from .clang-format's layout.
# Environment: SPRIG_BUILD_DIR, SPRIG_CUDA=OFF for the CPU-only build, SPRIG_JOBS (see build.sh);
#   SPRIG_SANITIZE_STAGE=0 skips stage 2, SPRIG_FUZZ_STAGE=0 skips stage 3,
#   SPRIG_FUZZ_SECONDS (default 10) is each fuzz target's smoke run time.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SPRIG_BUILD_DIR:-$repo/build}"
jobs="${SPRIG_JOBS:-$(nproc)}"

"$repo/tools/build.sh"
"$repo/tools/install_packages.sh" clang-format

cd "$repo"
# The repository's files: git's tracked files, or every file outside build trees when this is not
# a git checkout.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files)
else
  mapfile -t files < <(find . \( -path ./.git -o -path './build*' -o -path ./gpu_out \) -prune \
    -o -type f -print | sed 's#^\./##')
fi
mapfile -t sources < <(printf '%s\n' "${files[@]}" | grep -E '\.(h|cpp|cu|cuh)$')
if ! clang-format --dry-run -Werror "${sources[@]}"; then
  echo "sprig: sources differ from .clang-format's layout (fix: clang-format -i <files>)" >&2
  exit 1
fi
# One line: lines per folder of C++, CUDA, Python and shell sources and of Markdown.
report="size (lines):"
for folder in tensor autograd attention data nn speculative train tools tests docs; do
  n=$(printf '%s\n' "${files[@]}" | grep -E "^$folder/.*\.(h|cpp|cu|cuh|py|sh|md)$" | xargs cat |
    wc -l)
  report+=" $folder $n,"
done
echo "${report%,}"

declare -A result
run_stage() {  # run_stage NAME COMMAND...: runs the command, records passed / FAILED
  local name=$1 start=$SECONDS
  shift
  echo "sprig: stage $name"
  if "$@"; then result[$name]="passed"; else result[$name]="FAILED"; fi
  result[$name]+=" ($((SECONDS - start)) s)"
}

# The tree of stages 2 and 3: clang, sanitisers, the fuzz targets.
san_dir="$build_dir-san"
configure_sanitized() {
  "$repo/tools/install_packages.sh" clang libclang-rt-dev  # libclang-rt-dev: libFuzzer
  cmake -S "$repo" -B "$san_dir" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Sanitize \
    -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1" -DSPRIG_CUDA=OFF -DSPRIG_SANITIZE=address,undefined \
    -DSPRIG_FUZZ=ON >/dev/null
}

sanitize_stage() {
  configure_sanitized && cmake --build "$san_dir" -j "$jobs" &&
    ctest --test-dir "$san_dir" -L cpu -LE slow --output-on-failure -j "$jobs"
}

fuzz_stage() {
  local dir="$san_dir" seconds="${SPRIG_FUZZ_SECONDS:-10}" failed=0 target scratch
  configure_sanitized && cmake --build "$dir" --target fuzz_targets -j "$jobs" || return 1
  scratch="$(mktemp -d)"
  for target in "$repo"/tools/fuzz/seeds/*/; do
    target="$(basename "$target")"
    mkdir -p "$scratch/$target"  # new inputs go here, the committed seeds stay as they are
    if (cd "$scratch" && "$dir/tools/fuzz/$target" -max_total_time="$seconds" -max_len=4096 \
      -timeout=10 "$scratch/$target" "$repo/tools/fuzz/seeds/$target" 2>"$scratch/$target.log"); then
      echo "$target: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$scratch/$target.log")"
    else
      tail -n 40 "$scratch/$target.log"
      echo "$target: FAILED (the crashing input is kept in $scratch)"
      failed=1
    fi
  done
  ((failed)) || rm -rf "$scratch"
  return "$failed"
}

run_stage suite ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
[[ "${SPRIG_SANITIZE_STAGE:-1}" == 0 ]] || run_stage sanitizers sanitize_stage
[[ "${SPRIG_FUZZ_STAGE:-1}" == 0 ]] || run_stage fuzz fuzz_stage
status=0
for name in suite sanitizers fuzz; do
  [[ -n "${result[$name]:-}" ]] || continue
  echo "sprig: $name ${result[$name]}"
  [[ "${result[$name]}" == passed* ]] || status=1
done
exit "$status"
