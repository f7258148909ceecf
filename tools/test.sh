#!/usr/bin/env bash
# Builds sprig (installing missing Debian packages first), checks that every C++/CUDA source is
# formatted as .clang-format says, prints a one-line size report (lines per folder) and runs the
# whole CTest suite; GPU tests skip themselves when no device is present. Ends with CTest's
# summary; exits non-zero on a failure or a formatting difference.
# Environment: SPRIG_BUILD_DIR, SPRIG_CUDA=OFF for the CPU-only build, SPRIG_JOBS (see build.sh).
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

exec ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
