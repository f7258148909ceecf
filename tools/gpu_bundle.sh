#!/usr/bin/env bash
# The GPU bundle: sprig and its GPU tests built here, where CUDA, cuDNN and the Debian packages
# are, packed as one file that runs on a GPU machine with no network, no packages and no compiler
# (README.md, "GPU checks"; tools/gpu_check.sh --bundle runs it there).
#
#   tools/gpu_bundle.sh [--out FILE]   build into build-bundle/ and pack FILE
#                                      (default build-bundle/sprig-gpu.tar.xz)
#   tools/gpu_bundle.sh --check FILE   check here that FILE is self-contained
#   tools/gpu_bundle.sh --ptxas LOG    the flash kernels' ptxas figures from a build log (a build
#                                      with -DSPRIG_PTXAS_VERBOSE=ON)
#
# The build: CUDA on, cuDNN required, CPU code for x86-64-v3 (AVX2, no AVX-512; the GPU machine's
# host CPU is not this one), ptxas's figures of the flash kernels printed. The bundle, one folder
# sprig-gpu/:
#   bin/       sprig and every *_gpu_tests binary, stripped, RPATH $ORIGIN/../lib
#   lib/       every shared library they load except glibc's and the CUDA family's (the CUDA
#              runtime, cuBLAS, cuDNN, NCCL, the driver), libstdc++ and libgcc_s included
#   tools/, train/configs/, tests/golden/   the scripts, data and test fixtures of the stages
#   MANIFEST   commit, build flags, CUDA and cuDNN versions, the newest glibc and libstdc++ symbol
#              versions needed, the flash kernels' ptxas figures, each file's sha256
# The data-parallel plugins are left out: they need Open MPI's launcher and components, which the
# GPU machine lacks. The bundle must pack to at most 40 MiB.
#
# --check unpacks FILE into an empty folder and checks, failing on the first problem: the sha256
# of every file; that ldd of every bundled file resolves nothing outside the bundle but glibc and
# the CUDA family (with only the bundle's lib/ and the CUDA libraries on the library path); that
# no bundled file holds an AVX-512 (zmm) instruction; then, under `env -i`, `sprig --version`,
# each GPU test binary's test list, and stage 1 of tools/gpu_check.sh, where on a machine without
# a GPU every step must end with sprig's "no CUDA device" message.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
max_mib=40
# Libraries a GPU machine provides: glibc's, and the CUDA family's (toolkit, driver, wheels).
provided='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil)\.so|^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc[a-z-]*|nvJitLink)\.so'

die() {  # a runtime failure (exit 1); usage errors exit 2
  echo "sprig: [gpu_bundle] $1" >&2
  exit "${2:-1}"
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}

# The resolved dependencies of an ELF file, one "soname path" a line ("soname not-found" when
# unresolved), under the library path given.
deps_of() {
  env -i LD_LIBRARY_PATH="$2" ldd "$1" 2>/dev/null | awk '
    /=> not found/ { print $1, "not-found"; next }
    /=> \// { print $1, $3 }'
}

build_and_pack() {
  local out="$1" build="$repo/build-bundle"
  # Replace only an earlier bundle, never another file.
  if [[ -e "$out" ]] && ! tar -tJf "$out" sprig-gpu/MANIFEST >/dev/null 2>&1; then
    die "$out exists and is not a sprig GPU bundle: choose another --out"
  fi
  "$repo/tools/install_packages.sh" patchelf xz-utils binutils
  mapfile -t gpu_tests < <(cd "$repo/tests" && ls -- */*_gpu.cpp | cut -d/ -f1 | sort -u |
    sed 's/$/_gpu_tests/')
  # The flash objects are rebuilt (from ccache when unchanged) so that ptxas -v prints again.
  rm -f "$build"/attention/CMakeFiles/sprig_attention.dir/cuda/flash_*.cu.o
  mkdir -p "$build"
  echo "sprig: building the bundle's targets in $build (sprig ${gpu_tests[*]})"
  SPRIG_BUILD_DIR="$build" SPRIG_CUDA=ON SPRIG_TARGETS="sprig ${gpu_tests[*]}" \
    SPRIG_CMAKE_ARGS="-DSPRIG_CPU_ARCH=x86-64-v3 -DSPRIG_CUDNN=ON -DSPRIG_PTXAS_VERBOSE=ON" \
    "$repo/tools/build.sh" >"$build/build.log" 2>&1 ||
    {
      tail -n 40 "$build/build.log"
      die "the build failed (log: $build/build.log)"
    }

  local b="$scratch/sprig-gpu"
  mkdir -p "$b/bin" "$b/lib" "$b/tools/bench" "$b/train"
  cp "$build/tools/sprig" "${gpu_tests[@]/#/$build/tests/}" "$b/bin/"
  # Every library the binaries load, but glibc's and the CUDA family's.
  local soname path
  while read -r soname path; do
    [[ "$path" != not-found ]] || die "$soname, needed by the binaries, is not found here"
    [[ "$soname" =~ $provided ]] || cp -L "$path" "$b/lib/$soname"
  done < <(for f in "$b"/bin/*; do deps_of "$f" "${LD_LIBRARY_PATH:-}"; done | sort -u)
  chmod u+w "$b"/lib/*
  strip --strip-unneeded "$b"/bin/* "$b"/lib/*
  for f in "$b"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
  for f in "$b"/lib/*; do patchelf --set-rpath '$ORIGIN' "$f"; done
  # What the stages run besides the binaries.
  cp -r "$repo/tools/gpu_check.sh" "$repo/tools/gpu_check" "$b/tools/"
  cp "$repo"/tools/bench/attention_vs_torch.py "$repo"/tools/bench/attention_masks.py "$b/tools/bench/"
  cp -r "$repo/train/configs" "$b/train/"
  mkdir -p "$b/tests/golden"  # the GPU tests' fixtures (they read $SPRIG_SOURCE_DIR/tests/golden)
  (cd "$repo/tests/golden" && cp -r -- *_tiny *_expected.safetensors "$b/tests/golden/")

  write_manifest "$b" "$build" >"$b/MANIFEST"
  (cd "$b" && find . -type f ! -name MANIFEST -printf '%P\n' | sort | xargs sha256sum) \
    >>"$b/MANIFEST"
  sed -n '/^ptxas/,/^$/p' "$b/MANIFEST"

  mkdir -p "$(dirname "$out")"
  partial="$out.tmp"
  tar -C "$scratch" -cf - sprig-gpu | xz -9 -T0 >"$out.tmp"
  local bytes
  bytes=$(stat -c %s "$out.tmp")
  ((bytes <= max_mib * 1024 * 1024)) ||  # the EXIT trap removes the partial file
    die "the bundle packs to $((bytes / 1024 / 1024)) MiB, over the limit of $max_mib MiB"
  mv "$out.tmp" "$out"
  partial=""
  echo "sprig: bundle $out: $(awk "BEGIN { printf \"%.1f\", $bytes / 1048576 }") MiB" \
    "($(find "$b" -type f | wc -l) files, $(du -sh "$b" | cut -f1) unpacked)"
}

# The MANIFEST's head (the sha256 lines follow it).
write_manifest() {
  local b="$1" build="$2" commit
  commit="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  [[ -z "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]] ||
    commit+=" (with uncommitted changes)"
  cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
  echo "sprig GPU bundle"
  echo "commit: $commit"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -n 1)"
  echo "C++ flags: $(compile_flags "$build" tensor/cpu/copy.cpp)"
  echo "CUDA flags: $(compile_flags "$build" tensor/cuda/copy.cu)"
  echo "CUDA: $(sed -n 's/.*CMAKE_CUDA_COMPILER_VERSION "\(.*\)")/\1/p' \
    "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake)"
  echo "cuDNN: $(env LD_LIBRARY_PATH="$b/lib:${LD_LIBRARY_PATH:-}" "$b/bin/sprig" --version |
    sed -n 's/.*built against cuDNN \([0-9.]*\).*/\1/p') ($(cache SPRIG_CUDNN_LIBRARY))"
  echo "newest symbol versions needed: $(newest_symbol GLIBC "$b") $(newest_symbol GLIBCXX "$b")"
  echo "not bundled: the data-parallel plugins (Open MPI's launcher and components are missing there)"
  echo
  echo "ptxas figures of the flash kernels (sm_$(cache SPRIG_CUDA_ARCH); dynamic shared memory is" \
    "set at launch, docs/kernels.md):"
  ptxas_figures "$build/build.log"
  echo
  echo "sha256:"
}

# The code-generation flags one source of the build was compiled with (compile_commands.json).
compile_flags() {
  python3 - "$1/compile_commands.json" "$2" <<'EOF'
import json, sys
entries = [e for e in json.load(open(sys.argv[1])) if e["file"].endswith("/" + sys.argv[2])]
words = entries[0]["command"].split() if entries else []
keep = ("-O", "-march", "-f", "-std", "-arch", "-gencode", "--generate-code", "-Xptxas", "--expt")
print(" ".join(w for w in words if w.startswith(keep)))
EOF
}

# The newest version of a symbol family (GLIBC, GLIBCXX) any bundled file needs.
newest_symbol() {
  objdump -T "$2"/bin/* "$2"/lib/* 2>/dev/null | grep -o "$1_[0-9.]*" | sort -uV | tail -n 1
}

# A table of the flash kernels' registers, spills and static shared memory, from ptxas -v's
# messages in the build log; the dK/dV kernel at head dim 128 is flagged if it spills.
ptxas_figures() {
  awk '
    /Compiling entry function/ { name = $0; sub(/.*function \047/, "", name); sub(/\047.*/, "", name) }
    /bytes spill stores/ { stores[name] = $5; loads[name] = $9 }
    /Used [0-9]+ registers/ {
      match($0, /Used [0-9]+ registers/); regs[name] = substr($0, RSTART + 5, RLENGTH - 15)
      smem[name] = 0
      if (match($0, /[0-9]+ bytes smem/)) smem[name] = substr($0, RSTART, RLENGTH - 11)
    }
    END { for (n in regs) if (n ~ /flash/) print n, regs[n], stores[n] + 0, loads[n] + 0, smem[n] }
  ' "$1" | sort -u | while read -r mangled regs stores loads smem; do
    local name
    name="$(echo "$mangled" | c++filt | sed 's/sprig::cuda::(anonymous namespace):://g; s/sprig::cuda::flash:://g; s/^void //; s/(.*//; s/__nv_bfloat16/bf16/g; s/__half/f16/g')"
    local flag=""
    [[ "$name" != *dkdv*128* || "$stores" == 0 ]] || flag="  <- spills"
    printf '  %-58s %3s regs  spill %5s B stored %5s B loaded  static smem %6s B%s\n' "$name" "$regs" \
      "$stores" "$loads" "$smem" "$flag"
  done
}

check_bundle() {
  local file="$1"
  [[ -f "$file" ]] || die "no bundle at $file"
  local tmp="$scratch"
  tar -C "$tmp" -xf "$file" || die "$file is not a bundle (tar could not unpack it)"
  local b="$tmp/sprig-gpu"
  [[ -f "$b/MANIFEST" ]] || die "$file has no sprig-gpu/MANIFEST"
  head -n 8 "$b/MANIFEST"

  (cd "$b" && sed -n '/^sha256:$/,$p' MANIFEST | tail -n +2 | sha256sum --quiet -c) ||
    die "files differ from the MANIFEST's sha256"
  echo "check: every file matches its sha256"

  # Only the bundle's lib/ and the CUDA libraries on the library path.
  local cuda_libs="/usr/local/cuda/lib64" f soname path bad=0
  for f in "$b"/bin/* "$b"/lib/*; do
    while read -r soname path; do
      if [[ "$path" == not-found ]]; then
        [[ "$soname" =~ $provided ]] && continue  # the driver (libcuda) where there is no GPU
        echo "  ${f#"$b"/} needs $soname, found nowhere"
        bad=1
      elif [[ "$path" != "$b"/lib/* && ! "$soname" =~ $provided ]]; then
        echo "  ${f#"$b"/} loads $path from outside the bundle"
        bad=1
      fi
    done < <(deps_of "$f" "$b/lib:$cuda_libs")
  done
  ((bad == 0)) || die "libraries resolve outside the bundle"
  echo "check: ldd of every file resolves only the bundle, glibc and the CUDA family"

  for f in "$b"/bin/* "$b"/lib/*; do
    local zmm
    zmm=$(objdump -d --no-show-raw-insn "$f" | grep -c '%zmm' || true)
    ((zmm == 0)) || die "${f#"$b"/} holds $zmm AVX-512 (zmm) instructions"
  done
  echo "check: no AVX-512 (zmm) instruction in bin/ and lib/"

  local run=(env -i PATH=/usr/bin:/bin HOME="$tmp" LD_LIBRARY_PATH="$b/lib:$cuda_libs")
  "${run[@]}" "$b/bin/sprig" --version || die "sprig --version failed"
  for f in "$b"/bin/*_gpu_tests; do
    local n
    n=$("${run[@]}" "$f" --gtest_list_tests | grep -c '^  ') || die "${f##*/} cannot list its tests"
    echo "check: ${f##*/} lists $n tests"
  done
  # gpu_check.sh sets the library path itself: the bundle's lib/ and the CUDA libraries.
  env -i PATH=/usr/bin:/bin HOME="$tmp" OUT="$tmp/out" bash "$b/tools/gpu_check.sh" \
    --bundle "$file" --stage 1 --no-device-expected || die "stage 1 failed"
  echo "sprig: $file is self-contained"
}

# A scratch folder for the staged or unpacked bundle, and the partial output, removed on exit.
scratch="$(mktemp -d)"
partial=""
trap 'rm -rf "$scratch" ${partial:+"$partial"}' EXIT

case "${1:-}" in
  -h | --help) usage ;;
  --check)
    [[ $# -eq 2 ]] || die "usage: tools/gpu_bundle.sh --check FILE" 2
    check_bundle "$2"
    ;;
  --ptxas)
    [[ $# -eq 2 && -f "${2:-}" ]] || die "usage: tools/gpu_bundle.sh --ptxas BUILD_LOG" 2
    ptxas_figures "$2"
    ;;
  --out)
    [[ $# -eq 2 ]] || die "usage: tools/gpu_bundle.sh --out FILE" 2
    build_and_pack "$(realpath -m "$2")"
    ;;
  "") build_and_pack "$repo/build-bundle/sprig-gpu.tar.xz" ;;
  *) die "unknown argument '$1' (see --help)" 2 ;;
esac
