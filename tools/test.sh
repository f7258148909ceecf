#!/usr/bin/env bash
# Builds sprig (installing missing Debian packages first), checks that every C++/CUDA source is
# formatted as .clang-format says, prints a one-line size report (lines per folder), then runs
# three stages:
#   1. the whole CTest suite; GPU tests skip themselves when no device is present;
#   2. the CPU suite again, built CPU-only by clang with AddressSanitizer and
#      UndefinedBehaviorSanitizer (-O1 -g1: line numbers in reports at about half of
#      RelWithDebInfo's compile time; -O0, half the time of -O1, for all but the compute
#      libraries; in <build dir>-san), the slow label excluded (see README.md);
#   3. a short smoke run of every libFuzzer target of tools/fuzz on its committed seeds, built in
#      the same tree (the libraries the targets link are the sanitised ones of stage 2), as many
#      targets at a time as there are jobs.
# Every stage runs; the script ends with one line per stage (with its time) and the ten slowest
# tests of the suite, and exits non-zero when a stage fails or a source differs from
# .clang-format's layout. Every ctest call passes --timeout: a test without its own TIMEOUT
# property (tests/CMakeLists.txt) is bounded too.
#
# Usage: tools/test.sh           everything above (what .ci/run calls)
#        tools/test.sh --quick   between edits: the incremental build of the default tree and the
#                                CPU suite (label cpu), no format check, sanitisers or fuzzing
# Environment: SPRIG_BUILD_DIR, SPRIG_CUDA=OFF for the CPU-only build, SPRIG_JOBS (see build.sh);
#   SPRIG_SANITIZE_STAGE=0 skips stage 2, SPRIG_FUZZ_STAGE=0 skips stage 3,
#   SPRIG_FUZZ_SECONDS (default 10) is each fuzz target's smoke run time.
set -euo pipefail

quick=0
if (($# > 1)) || { (($# == 1)) && [[ "$1" != --quick ]]; }; then
  bad="$1"
  [[ "$1" == --quick ]] && bad="$2"
  echo "sprig: [tools/test.sh] unknown argument '$bad' (usage: tools/test.sh [--quick])" >&2
  exit 2
fi
(($# == 1)) && quick=1

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SPRIG_BUILD_DIR:-$repo/build}"
jobs="${SPRIG_JOBS:-$(nproc)}"
ctest_limit=120  # seconds, for a test without its own TIMEOUT property

"$repo/tools/build.sh"
if ((quick)); then
  start=$SECONDS
  ctest --test-dir "$build_dir" -L cpu --output-on-failure -j "$jobs" --timeout "$ctest_limit"
  echo "sprig: quick suite passed ($((SECONDS - start)) s)"
  exit 0
fi
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
    -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1" -DSPRIG_GLUE_OPT=-O0 -DSPRIG_CUDA=OFF \
    -DSPRIG_SANITIZE=address,undefined -DSPRIG_FUZZ=ON >/dev/null
}

sanitize_stage() {
  configure_sanitized && cmake --build "$san_dir" -j "$jobs" && check_time_limits "$san_dir" &&
    ctest --test-dir "$san_dir" -L cpu -LE slow --output-on-failure -j "$jobs" \
      --timeout "$ctest_limit"
}

fuzz_stage() {
  local dir="$san_dir" seconds="${SPRIG_FUZZ_SECONDS:-10}" failed=0 target scratch
  local targets=()
  configure_sanitized && cmake --build "$dir" --target fuzz_targets -j "$jobs" || return 1
  scratch="$(mktemp -d)"
  for target in "$repo"/tools/fuzz/seeds/*/; do
    target="$(basename "$target")"
    targets+=("$target")
    mkdir -p "$scratch/$target"  # new inputs go here, the committed seeds stay as they are
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done  # $jobs targets at a time
    (cd "$scratch" && "$dir/tools/fuzz/$target" -max_total_time="$seconds" -max_len=4096 \
      -timeout=10 "$scratch/$target" "$repo/tools/fuzz/seeds/$target" 2>"$scratch/$target.log"
    echo $? >"$scratch/$target.status") &
  done
  wait
  for target in "${targets[@]}"; do
    if [[ "$(cat "$scratch/$target.status")" == 0 ]]; then
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

# Fails when a test of the tree in $1 has no TIMEOUT property or one above 900 s (a hung test must
# fail within minutes, whichever way ctest is called).
check_time_limits() {
  ctest --test-dir "$1" --show-only=json-v1 | python3 -c '
import json, sys
tests = json.load(sys.stdin)["tests"]
bad = [t["name"] for t in tests
       if not any(p["name"] == "TIMEOUT" and 0 < p["value"] <= 900 for p in t.get("properties", []))]
print("sprig: %d tests, each with a time limit of at most 900 s" % len(tests) if not bad else
      "sprig: tests without a TIMEOUT property of at most 900 s: " + ", ".join(bad))
sys.exit(1 if bad else 0)'
}

# The ten slowest tests of a ctest run, from the JUnit report CTest wrote (its own timing).
slowest_tests() {
  echo "sprig: the ten slowest tests of the suite (s):"
  sed -n 's/.*<testcase name="\([^"]*\)".* time="\([0-9.]*\)".*/\2 \1/p' "$1" |
    sort -rn | awk 'NR <= 10 { printf "  %8.1f  %s\n", $1, $2 }'  # awk reads all: no SIGPIPE
}

junit="$build_dir/Testing/suite.xml"
rm -f "$junit"
suite_stage() {
  check_time_limits "$build_dir" &&
    ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout "$ctest_limit" \
      --output-junit "$junit"
}
run_stage suite suite_stage
[[ "${SPRIG_SANITIZE_STAGE:-1}" == 0 ]] || run_stage sanitizers sanitize_stage
[[ "${SPRIG_FUZZ_STAGE:-1}" == 0 ]] || run_stage fuzz fuzz_stage
status=0
for name in suite sanitizers fuzz; do
  [[ -n "${result[$name]:-}" ]] || continue
  echo "sprig: $name ${result[$name]}"
  [[ "${result[$name]}" == passed* ]] || status=1
done
[[ ! -f "$junit" ]] || slowest_tests "$junit"
exit "$status"
