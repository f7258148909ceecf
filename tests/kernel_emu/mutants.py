#!/usr/bin/env python3
"""Plants known bugs in the CUDA kernels and checks that the kernel_emu tests catch every one.

For each mutant below (one exact edit of one kernel source), the emulation test that includes the
source is recompiled with the edited copy first on the include path, kernel_emu_tests is relinked
next to it, and the tests that cover the kernel run: the mutant is caught when they fail. The
source tree is never modified. Needs a CUDA build tree in which kernel_emu_tests is built.

Usage: tests/kernel_emu/mutants.py [--build DIR] [--only NAME ...]
Prints one line per mutant and exits 1 when one is missed.
"""
import argparse
import json
import pathlib
import shlex
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]

# name, what the bug is, source, exact text, replacement, test TU, gtest filter
MUTANTS = [
    ("fwd-barrier", "missing barrier: P V reads V before every thread's copy landed",
     "attention/cuda/flash_fwd.cu", "        __syncthreads();  // V landed\n", "\n",
     "flash_emu.cpp", "FlashEmu.Causal"),
    ("fwd-fragment", "wrong fragment index in the softmax row sum",
     "attention/cuda/flash_fwd.cu", "float& x = s[m][n][2 * h + j];", "float& x = s[m][n][2 * j + h];",
     "flash_emu.cpp", "FlashEmu.Causal"),
    ("fwd-mask", "wrong mask bit: the keep bits of the next row",
     "attention/cuda/flash_fwd.cu", "K::kWords, row0,\n", "K::kWords, row0 + 1,\n",
     "flash_emu.cpp", "FlashEmu.DocumentsWithAMaskPerBatchRow"),
    ("fwd-kv-parity", "wrong buffer: P V reads the V of the other buffer pair",
     "attention/cuda/flash_fwd.cu", "sv = v_buffer((e - first) % 2)", "sv = v_buffer((e + 1 - first) % 2)",
     "flash_emu.cpp", "FlashEmu.Causal"),
    ("fwd-o-barrier", "missing barrier: the O tile is stored before every warp staged its rows",
     "attention/cuda/flash_fwd.cu", "  __syncthreads();  // the O tile is complete\n", "\n",
     "flash_emu.cpp", "FlashEmu.Causal"),
    ("dkdv-barrier", "missing barrier: dV, dK and dQ read P^T and dS^T before every warp stored them",
     "attention/cuda/flash_bwd.cu", "    __syncthreads();  // P^T and dS^T are complete\n", "\n",
     "flash_emu.cpp", "FlashEmu.Causal"),
    ("dkdv-wait", "missing wait: the next item's Q and dO are read before their copies land",
     "attention/cuda/flash_bwd.cu", "    cp_async_wait<0>();\n    __syncthreads();  // the next item",
     "    __syncthreads();  // the next item", "flash_emu.cpp", "FlashEmu.Causal"),
    ("dkdv-fragment", "wrong fragment index: the lse of the other query column",
     "attention/cuda/flash_bwd.cu", "lse_s[j + 8 * n + 2 * t + c % 2]",
     "lse_s[j + 8 * n + 2 * t + c / 2]", "flash_emu.cpp", "FlashEmu.Causal"),
    ("dkdv-mask", "wrong mask bit: one keep-bit row for both query columns of a register pair",
     "attention/cuda/flash_common.cuh", "bits + (q0 + 8 * n + 2 * t + j) * words",
     "bits + (q0 + 8 * n + 2 * t) * words", "flash_emu.cpp",
     "FlashEmu.DocumentsWithAMaskPerBatchRow"),
    ("dq-barrier", "missing barrier: the next K, V overwrite the tiles other warps still read",
     "attention/cuda/flash_bwd.cu", "    __syncthreads();  // every warp is done with K and V\n",
     "\n", "flash_emu.cpp", "FlashEmu.Causal"),
    ("dq-fragment", "wrong fragment index: the lse of the other row half",
     "attention/cuda/flash_bwd.cu", "-lse2[c / 2]", "-lse2[c % 2]", "flash_emu.cpp",
     "FlashEmu.Causal"),
    ("dq-mask", "wrong mask bit: keys shifted by one in the deterministic dQ",
     "attention/cuda/flash_bwd.cu", "K::kWords, row0, j);", "K::kWords, row0, j + 1);",
     "flash_emu.cpp", "FlashEmu.DocumentsWithAMaskPerBatchRow"),
    ("ldmatrix-operand", "wrong ldmatrix row address: the B operand's matrices swapped",
     "attention/cuda/flash_common.cuh", "lane % 8 + lane / 16 * 8", "lane % 8 + lane / 8 % 2 * 8",
     "flash_emu.cpp", "FlashEmu.Causal"),
    ("combine-war", "missing barrier: a block reduction overwrites partials still being read",
     "tensor/cuda/loss.cu", "  __syncthreads();  // a previous call may still be reading `partial`\n",
     "\n", "loss_emu.cpp", "CrossEntropyEmu.*:KlDivEmu.*"),
    ("ce-ignored", "ignored rows get 0 * (softmax - onehot), NaN for non-finite logits",
     "tensor/cuda/loss.cu", "from_acc<T>(ignored ? A(0) : g * (", "from_acc<T>(g * (",
     "loss_emu.cpp", "CrossEntropyEmu.*"),
    ("argmax-barrier", "missing barrier: the block argmax reads warp results not yet stored",
     "tensor/cuda/reduce.cu", "    indices[warp] = i;\n  }\n  __syncthreads();\n",
     "    indices[warp] = i;\n  }\n", "reduce_emu.cpp", "ReduceEmu.*"),
    ("split-barrier", "missing barrier: a split line's warps combine partials not yet stored",
     "tensor/cuda/reduce.cu", "partial[(t >> 5) * lanes + x] = v;  // lane t & 31 is line x's first\n  __syncthreads();\n",
     "partial[(t >> 5) * lanes + x] = v;  // lane t & 31 is line x's first\n", "reduce_emu.cpp",
     "ReduceEmu.*"),
    ("rope-barrier", "missing barrier: rotations read angles other threads have not stored",
     "tensor/cuda/rope.cu", "  __syncthreads();\n", "\n", "rope_emu.cpp", "RopeEmu.*"),
    ("adamw-v", "the second moment is never stored", "tensor/cuda/optim.cu", "    v[i] = vi;\n",
     "\n", "optim_emu.cpp", "AdamWEmu.*"),
    ("warp-sum", "a butterfly step missing from warp_sum",
     "tensor/cuda/common.cuh", "for (int o = 16; o > 0; o >>= 1) v +=",
     "for (int o = 16; o > 1; o >>= 1) v +=", "norm_emu.cpp", "RmsNormEmu.*"),
    ("rms-norm-dw", "wrong index: every row slice writes the first partial row",
     "tensor/cuda/norm.cu", "partial[blockIdx.y * H + h] = acc;", "partial[h] = acc;",
     "norm_emu.cpp", "RmsNormEmu.*"),
]


def compile_command(build: pathlib.Path, tu: str) -> tuple[list[str], str, str]:
    """The TU's compile command (as a list), its directory and its object path."""
    for entry in json.loads((build / "compile_commands.json").read_text()):
        if entry["file"].endswith("tests/kernel_emu/" + tu):
            args = shlex.split(entry["command"])
            return args, entry["directory"], args[args.index("-o") + 1]
    sys.exit(f"[mutants] {tu} is not in {build}/compile_commands.json (configure with CUDA)")


def quiet(command: list[str], directory) -> None:
    """Runs a build command, showing its output only when it fails."""
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"[mutants] {command[0]} failed:\n{done.stdout}{done.stderr}")


def run_mutant(build: pathlib.Path, mutant: tuple, scratch: pathlib.Path) -> tuple[bool, str]:
    name, _, source, old, new, tu, test_filter = mutant
    text = (REPO / source).read_text()
    if text.count(old) != 1:
        sys.exit(f"[mutants] {name}: the text to replace occurs {text.count(old)} times in {source}")
    overlay = scratch / name
    (overlay / source).parent.mkdir(parents=True)
    (overlay / source).write_text(text.replace(old, new))

    args, directory, obj = compile_command(build, tu)
    mutant_obj = str(overlay / "mutant.o")
    args[args.index("-o") + 1] = mutant_obj
    args.insert(1, f"-I{overlay}")  # before the repository: the edited copy wins
    quiet(args, directory)

    tests_dir = build / "tests"
    link = shlex.split((tests_dir / "CMakeFiles/kernel_emu_tests.dir/link.txt").read_text())
    obj_rel = str(pathlib.Path(obj).relative_to(tests_dir)) if obj.startswith("/") else obj
    link[link.index(obj_rel)] = mutant_obj
    binary = str(overlay / "kernel_emu_tests")
    link[link.index("-o") + 1] = binary
    quiet(link, tests_dir)

    try:
        run = subprocess.run([binary, f"--gtest_filter={test_filter}"], capture_output=True,
                             text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return True, "timed out (a hang)"
    if run.returncode == 0:
        return False, "all tests passed"
    lines = [l.strip() for l in run.stdout.splitlines() + run.stderr.splitlines()]
    evidence = [l for l in lines if "[kernel_emu]" in l or "error" in l.lower() or "differ" in l]
    return True, evidence[0][:150] if evidence else "tests failed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(REPO / "build"), help="CUDA build tree")
    parser.add_argument("--only", nargs="*", help="mutant names to run (default: all)")
    args = parser.parse_args()
    build = pathlib.Path(args.build).resolve()
    chosen = [m for m in MUTANTS if not args.only or m[0] in args.only]
    missed = 0
    with tempfile.TemporaryDirectory(prefix="sprig-mutants-") as scratch:
        for mutant in chosen:
            caught, evidence = run_mutant(build, mutant, pathlib.Path(scratch))
            missed += not caught
            print(f"{mutant[0]:18} {'caught' if caught else 'MISSED':7} {mutant[1]}: {evidence}",
                  flush=True)
    print(f"{len(chosen) - missed} of {len(chosen)} mutants caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
